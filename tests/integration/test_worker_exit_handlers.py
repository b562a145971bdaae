"""What a train function registers to run at its process's exit runs, as in a fresh Python
process and a Ray worker: ``atexit`` handlers (a logger's flush, a library's clean-up) and
the finalizers of objects left open (a ``tempfile.TemporaryDirectory``, TensorFlow's
autograph files). Before, tandem's workers left without running them, and the temporary
folders stayed in /tmp."""

from __future__ import annotations

import json
import os

import pytest

from tandem import train, tune
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig
from tests.processes import no_workers_left

pytestmark = pytest.mark.timeout(180)

_KEPT: list = []


def _leaves_things_to_exit(config):
    import atexit
    import tempfile

    name = f"{train.get_context().get_world_rank()}-{config.get('i', 0)}"
    left_open = tempfile.TemporaryDirectory(prefix="left-open-", dir=config["dir"])
    with open(os.path.join(config["dir"], f"tmp-{name}"), "w") as f:
        f.write(left_open.name)
    pid = os.getpid()
    atexit.register(lambda: open(os.path.join(config["dir"], f"ran-{name}"), "w").write(
        json.dumps(pid)))
    _KEPT.append(left_open)  # alive until the process exits, as a user's cache would be
    train.report({"pid": pid})


def test_a_gang_s_exit_handlers_run_when_its_workers_exit(tmp_path):
    DataParallelTrainer(
        _leaves_things_to_exit, train_loop_config={"dir": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=str(tmp_path / "runs"), name="exit"),
    ).fit()
    assert no_workers_left() == []
    for rank in (0, 1):
        assert (tmp_path / f"ran-{rank}-0").exists()  # its atexit handler ran
        assert not os.path.exists((tmp_path / f"tmp-{rank}-0").read_text())  # and finalizer
    assert not [p for p in os.listdir(tmp_path) if p.startswith("left-open-")]


def _no_handlers(config):
    tune.report({"pid": os.getpid()})


def _imports_a_package_that_registers_one(config):
    import sys

    had = "multiprocessing.util" in sys.modules
    import multiprocessing.util  # noqa: F401 - registers its exit function as it is imported

    tune.report({"pid": os.getpid(), "had": had})


def test_trials_that_register_handlers_have_them_run_and_others_keep_their_worker(tmp_path):
    """A trial that registered an ``atexit`` handler ends its worker process (a fresh one
    runs the next trial, as it would have run the handler at its exit); trials that
    register none, or whose handlers an installed package registered as it was imported,
    go on in the same process, as before."""
    grid = tune.Tuner(
        _leaves_things_to_exit,
        param_space={"i": tune.grid_search([0, 1, 2]), "dir": str(tmp_path)},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "runs"), name="t", verbose=0),
    ).fit()
    assert grid.num_errors == 0
    pids = [r.metrics["pid"] for r in grid]
    assert len(set(pids)) == 3  # each in its own process
    assert no_workers_left() == []
    ran = {int(json.loads((tmp_path / f"ran-0-{i}").read_text())) for i in range(3)}
    assert ran == set(pids)  # each trial's handler ran, in its own process
    assert not [p for p in os.listdir(tmp_path) if p.startswith("left-open-")]

    plain = tune.Tuner(
        _no_handlers, param_space={"i": tune.grid_search([0, 1, 2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "runs"), name="p", verbose=0),
    ).fit()
    assert len({r.metrics["pid"] for r in plain}) == 1  # one worker ran them all

    installed = tune.Tuner(  # a handler registered by an installed package is no reason
        _imports_a_package_that_registers_one, param_space={"i": tune.grid_search([0, 1, 2])},
        tune_config=tune.TuneConfig(max_concurrent_trials=1),
        run_config=tune.RunConfig(storage_path=str(tmp_path / "runs"), name="i", verbose=0),
    ).fit()
    first = min(installed, key=lambda r: r.config["i"])
    assert first.metrics["had"] is False  # the first trial imported it
    assert len({r.metrics["pid"] for r in installed}) == 1
