"""A gang's torch process group survives a failed first join: the whole gang tears the
attempt down and joins again after a pause, and the run counts no failure."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import train
from tandem.train import FailureConfig, RunConfig, ScalingConfig
from tandem.train.backends.torch import TorchBackend
from tandem.train.torch import TorchConfig, TorchTrainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


class FirstJoinFailsOnRank1(TorchBackend):
    """Rank 1's first join fails after its peer connected, as gloo's "connectFullMesh
    failed ... Connection closed by peer" does on a loaded machine; gloo itself is real."""

    def on_worker_start(self, context):
        import torch.distributed as dist

        real = dist.init_process_group
        calls = []

        def flaky(*args, **kwargs):
            calls.append(1)
            real(*args, **kwargs)
            if context.world_rank == 1 and len(calls) == 1:
                dist.destroy_process_group()
                raise dist.DistBackendError(
                    "[gloo/transport/tcp/pair.cc:534] Connection closed by peer "
                    "[127.0.0.1]:40000 (Gloo connectFullMesh failed)")

        dist.init_process_group = flaky
        try:
            super().on_worker_start(context)
        finally:
            dist.init_process_group = real
        os.environ["JOIN_ATTEMPTS"] = str(len(calls))


class FlakyJoinConfig(TorchConfig):
    def backend(self):
        return FirstJoinFailsOnRank1(self.backend_name, self.timeout_s)


def allreduce_once(config):
    import torch
    import torch.distributed as dist

    rank = train.get_context().get_world_rank()
    t = torch.tensor([float(rank + 1)])
    dist.all_reduce(t)
    attempts = torch.tensor([float(os.environ["JOIN_ATTEMPTS"])])
    gathered = [torch.zeros(1) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, attempts)
    train.report({"sum": t.item(), "attempts": [int(g.item()) for g in gathered]})


def test_a_failed_first_join_is_retried_by_the_whole_gang(storage):
    tandem.init(num_cpus=2)
    result = TorchTrainer(
        allreduce_once,
        torch_config=FlakyJoinConfig(),
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="join",
                             failure_config=FailureConfig(max_failures=0)),
    ).fit()
    assert result.error is None
    assert result.metrics["sum"] == 3.0  # the collective formed anew works: 1 + 2
    assert result.metrics["attempts"] == [2, 2]  # both ranks joined twice, together
