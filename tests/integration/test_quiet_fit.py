"""A plain fit says nothing at WARNING or above when nothing is wrong: not on cold workers,
not on warm ones (the cluster's own notices, such as a worker connecting, are frames the
driver knows, never "dropped a frame" noise)."""

from __future__ import annotations

import logging

import tandem
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def _loop(config):
    train.report({"rank": train.get_context().get_world_rank()})


def test_two_fits_log_no_warnings(tmp_path, caplog):
    tandem.init(num_cpus=2)
    caplog.set_level(logging.WARNING, logger="tandem")
    for i in range(2):  # the second fit takes warm workers from the pool
        result = DataParallelTrainer(
            _loop, scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=str(tmp_path), name=f"quiet-{i}"),
        ).fit()
        assert result.error is None
    noise = [f"{r.name}: {r.getMessage()}" for r in caplog.records
             if r.name.startswith("tandem") and r.levelno >= logging.WARNING]
    assert noise == []
