"""W&B tracking under Ray's import paths (issue 17, item 6): ``WandbLoggerCallback`` and
``setup_wandb`` in W&B's offline mode (no account, no network), the run files on disk read
back (tests/wandb_offline.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

from tandem import train, tune
from tandem.air.integrations.wandb import WandbLoggerCallback, setup_wandb
from tandem.train import RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer
from tests.wandb_offline import offline_runs

wandb = pytest.importorskip("wandb")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


@pytest.fixture(autouse=True)
def _no_account(monkeypatch, tmp_path):
    """No key, no login, no network: offline runs must need none of them."""
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb-config"))
    monkeypatch.setenv("WANDB_CACHE_DIR", str(tmp_path / "wandb-cache"))
    monkeypatch.setenv("WANDB_DATA_DIR", str(tmp_path / "wandb-data"))
    yield
    wandb.teardown()  # the driver's wandb-core service ends with the test


def _trainable(config):
    run = setup_wandb(config, project="inner", mode="offline")
    for i in range(3):
        run.log({"inner": i * config["x"]}, step=i)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "weights"), "w") as f:
                f.write(str(i))
            checkpoint = train.Checkpoint.from_directory(d) if i == 1 else None
            tune.report({"loss": config["x"] / (i + 1), "nested": {"a": i}, "label": "text"},
                        checkpoint=checkpoint)
    if config["x"] == 3:
        raise RuntimeError("trial x=3 fails on purpose")


def test_callback_and_setup_wandb_write_one_offline_run_per_trial(tmp_path):
    grid = tune.Tuner(
        _trainable,
        param_space={"x": tune.grid_search([1, 2, 3]), "opt": {"lr": 0.1}},
        run_config=tune.RunConfig(
            name="tracked", storage_path=str(tmp_path / "results"), verbose=0,
            callbacks=[WandbLoggerCallback(project="outer", mode="offline",
                                           excludes=["time_total_s"],
                                           upload_checkpoints=True)]),
    ).fit()
    assert len(grid) == 3
    for result in grid:
        x = result.config["x"]
        trial_name = os.path.basename(result.path)
        runs = offline_runs(result.path)  # each trial's runs live in its own folder
        by_project = {r.project: r for r in runs}
        assert sorted(by_project) == ["inner", "outer"], [r.path for r in runs]

        outer = by_project["outer"]  # the callback's run, from the driver
        # ... in a folder of its own: never the one the trial's run (same id, same second
        # perhaps) writes, whichever process starts first
        assert os.path.dirname(outer.path).endswith(f"-{outer.run_id}-callback")
        assert os.path.dirname(by_project["inner"].path).endswith(f"-{outer.run_id}")
        assert outer.name == trial_name and outer.group == "tracked"
        assert outer.run_id == result.metrics["trial_id"]
        assert outer.config["x"] == x and outer.config["opt"] == {"lr": 0.1}
        assert outer.metric("loss") == [(1, x / 1), (2, x / 2), (3, x / 3)]
        assert [v for _, v in outer.metric("nested/a")] == [0, 1, 2]
        assert not outer.metric("time_total_s")  # excludes=[...]
        assert not outer.metric("label")  # strings are not logged, as Ray
        assert outer.config.get("trial_id") == result.metrics["trial_id"]  # AUTO_CONFIG_KEYS
        assert outer.exit_code == (1 if x == 3 else 0)
        assert outer.artifacts == [f"checkpoint_{trial_name}"]  # upload_checkpoints=True

        inner = by_project["inner"]  # setup_wandb in the trial
        assert inner.run_id == outer.run_id and inner.name == trial_name
        assert inner.config["x"] == x
        assert inner.metric("inner") == [(0, 0), (1, x), (2, 2 * x)]
        assert inner.exit_code == (1 if x == 3 else 0)


def _ddp_loop(config):
    run = setup_wandb(config, project="ddp")  # offline through WANDB_MODE
    rank = train.get_context().get_world_rank()
    for step in range(2):
        run.log({"rank": rank}, step=step)
        train.report({"step": step})


def test_setup_wandb_in_a_two_worker_torch_trainer_logs_from_rank_zero_only(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    result = TorchTrainer(
        _ddp_loop, train_loop_config={"lr": 0.01},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name="ddp", storage_path=str(tmp_path / "results")),
    ).fit()
    assert result.error is None
    runs = offline_runs(result.path)  # beside the run's results
    assert len(runs) == 1, [r.path for r in runs]  # rank 1 got a disabled run
    assert runs[0].project == "ddp" and runs[0].config["lr"] == 0.01
    assert runs[0].metric("rank") == [(0, 0), (1, 0)]
    assert runs[0].exit_code == 0


HOLDER = """
import ctypes, sys
ctypes.CDLL(None).prctl(15, b"wandb-core", 0, 0, 0)  # PR_SET_NAME: the service's name
f = open(sys.argv[1], "ab")
print("open", flush=True)
sys.stdin.readline()  # holds the file until told
f.close()
print("closed", flush=True)
sys.stdin.readline()
"""


def test_the_callback_waits_until_the_service_has_closed_each_run_file(tmp_path):
    """``run.finish()`` only tells wandb-core that the run is over; the service writes and
    closes the run's file later (a CI run read a callback's file with no run record in it
    yet). The callback waits for the service, here a process of that name holding a file."""
    import subprocess
    import sys
    import threading
    import time

    from tandem.tune.integration.wandb import _wait_closed

    path = str(tmp_path / "run-x.wandb")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        # still open at the deadline: answered, after waiting until then
        t0 = time.monotonic()
        assert _wait_closed({path}, time.monotonic() + 0.3) == {path}
        assert time.monotonic() - t0 >= 0.3
        # closed while the callback waits: it returns once the file is closed
        release = threading.Timer(0.2, lambda: (holder.stdin.write("\n"), holder.stdin.flush()))
        release.start()
        assert _wait_closed({path}, time.monotonic() + 60) == set()
        assert holder.stdout.readline().strip() == "closed"  # not before the holder closed it
        release.join()
    finally:
        holder.kill()
        holder.wait()


def test_a_run_whose_trial_never_ended_is_finished_and_whole_when_the_experiment_ends(
        tmp_path):
    """A trial still running when the experiment ends (Ctrl-C, fail_fast): its run is
    finished with the others and ``on_experiment_end`` waits for it (it did not: the run was
    told to end and left unwatched)."""
    from types import SimpleNamespace

    cb = WandbLoggerCallback(project="outer", mode="offline")
    cb.setup()
    trial = SimpleNamespace(trial_id="t0001", name="t0001", config={"x": 1},
                            path=str(tmp_path / "t0001"))
    cb.log_trial_start(trial)
    cb.log_trial_result(1, trial, {"loss": 0.5, "training_iteration": 1})
    cb.on_experiment_end([trial])
    (run,) = offline_runs(trial.path)
    assert run.project == "outer" and run.exit_code == 0
    assert run.metric("loss") == [(1, 0.5)]
