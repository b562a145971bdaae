"""Plain PyTorch DDP, the floor for ``ddp_throughput``: run under ``torchrun``.

``torchrun --standalone --nproc_per_node 2 _ddp_plain.py '{"batch_size": 256, ...}'``
runs exactly the loop of ``_ddp_model.run_steps`` with ``DistributedDataParallel`` over
gloo; rank 0 writes the figures as JSON to ``$BENCH_RESULT_FILE``.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from benchmarks.cases._common import write_json
    from benchmarks.cases._ddp_model import make_model, run_steps

    config = json.loads(sys.argv[1])
    torch.set_num_threads(int(config.get("threads", 1)))  # the same on every side
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    model = DistributedDataParallel(make_model())
    figures = run_steps(
        model,
        batch_size=config["batch_size"],
        warmup=config["warmup"],
        steps=config["steps"],
        rank=rank,
    )
    figures["torch_threads"] = torch.get_num_threads()
    if rank == 0 and os.environ.get("BENCH_RESULT_FILE"):
        write_json(os.environ["BENCH_RESULT_FILE"], figures)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
