"""ddp_throughput: steady-state DDP training speed and memory, against plain torchrun.

What it measures: MLP 784-512-512-10, batch 256 per worker, 2 workers, gloo, synthetic
data (``_ddp_model.py``). After ``warmup`` untimed steps rank 0 times ``steps`` steps:
``steps_per_s``. The same loop runs under tandem's ``TorchTrainer`` (``prepare_model``),
under plain ``torchrun --nproc_per_node 2 _ddp_plain.py`` (``DistributedDataParallel``)
and under Ray Train V2's ``TorchTrainer``. Every side runs with the same threads per worker
(``torch.set_num_threads(threads)``, default 1: one core per worker on this 2-core machine;
``torch_threads`` records it) on the same data (the same seeded batches per rank, so every
side ends at the same ``final_loss``). Also ``process_s`` (spawn to exit) and ``peak_pss_mb``, the PSS of the
whole process tree (driver, workers and any helper processes) sampled during the run.

Why: a trainer must not tax the training loop itself. Ray Train V2 runs at 52.4 steps/s
vs 53.6 for torchrun (0.98×) here, but its whole process takes 29.7 s vs 8.8 s and 2.07 GB
vs 0.71 GB.

Target (issue): ≥ 0.98× torchrun's steps/s; ≤ 0.8 GB PSS for the 2-worker fit.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.cases._common import (
    Case,
    Figure,
    RunContext,
    Target,
    Variant,
    log,
    ray_train_env,
    read_json,
    subprocess_variant,
)

PLAIN_SCRIPT = Path(__file__).with_name("_ddp_plain.py")


def _loop_config(params: dict[str, Any]) -> dict[str, Any]:
    return {k: int(params[k]) for k in ("batch_size", "warmup", "steps", "threads")}


def _run(framework: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    from benchmarks.cases._loops import ddp_loop
    from benchmarks.cases._trainers import fit_torch_trainer

    out = Path(workdir) / "ddp.json"
    _, fit_s = fit_torch_trainer(
        framework,
        ddp_loop,
        {**_loop_config(params), "out": str(out)},
        workers=int(params["workers"]),
        storage_path=workdir,
        name="ddp_throughput",
    )
    figures = read_json(out)
    figures["fit_s"] = fit_s
    log(f"{figures['steps_per_s']:.1f} steps/s, fit {fit_s:.1f} s")
    return figures


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("tandem", params, workdir)


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("ray", params, workdir)


def _run_torchrun(ctx: RunContext) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc_per_node={int(ctx.params['workers'])}",
        str(PLAIN_SCRIPT),
        json.dumps(_loop_config(ctx.params)),
    ]
    return ctx.child(None, cmd=cmd, sample_memory=True)


_M = __name__
CASE = Case(
    name="ddp_throughput",
    doc=__doc__ or "",
    figures=[
        Figure(
            "steps_per_s",
            "DDP MLP steady-state",
            "steps/s",
            "higher",
            Target(">=", 0.98, "torchrun"),
        ),
        Figure("peak_pss_mb", "peak PSS of the process tree", "MB", "lower", Target("<=", 800)),
        Figure("process_s", "whole fresh process", "s", "lower"),
        Figure("final_loss", "loss after the timed steps (same data, same result)", "", "info"),
    ],
    variants=[
        subprocess_variant(
            "tandem",
            "tandem",
            "tandem",
            f"{_M}:run_tandem",
            sample_memory=True,
            extra_requires=("torch",),
        ),
        Variant("torchrun", "torchrun", "plain torchrun", _run_torchrun),
        subprocess_variant(
            "ray", "ray", "Ray Train V2", f"{_M}:run_ray", env=ray_train_env(), sample_memory=True
        ),
    ],
    params={"workers": 2, "batch_size": 256, "warmup": 30, "steps": 300, "threads": 1},
    smoke_params={"workers": 2, "batch_size": 32, "warmup": 2, "steps": 10, "threads": 1},
    timeout_s=400,
    smoke_timeout_s=60,
)
