"""Ray API that Ray's example programs use, with Ray's semantics (issue 17, item 1)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import tandem
from tandem import train, tune
from tandem._core.errors import ConfigError
from tandem.train import DataParallelTrainer, FailureConfig, RunConfig, ScalingConfig
from tandem.tune.schedulers import FIFOScheduler
from tandem.tune.schedulers.base import Decision, TrialSuggestion

pytestmark = pytest.mark.timeout(180)


def _rows(path: str) -> list[dict]:
    with open(os.path.join(path, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


# -- FailureConfig(fail_fast=...) ---------------------------------------------------------------
def test_fail_fast_validation_as_ray():
    assert FailureConfig(fail_fast=True).fail_fast is True
    assert FailureConfig(fail_fast="raise").raises
    assert FailureConfig(fail_fast="RAISE").raises
    with pytest.raises(ConfigError, match="fail_fast='sometimes'"):
        FailureConfig(fail_fast="sometimes")
    with pytest.raises(ConfigError, match="needs max_failures=0"):
        FailureConfig(max_failures=2, fail_fast=True)


def _fail_first(config):
    if config["i"] == 0:
        raise ValueError("trial zero breaks")
    deadline = time.monotonic() + 60  # the others would run a minute unless stopped
    step = 0
    while time.monotonic() < deadline:
        step += 1
        tune.report({"step": step})
        time.sleep(0.05)


@pytest.mark.slow
def test_fail_fast_true_stops_the_experiment_at_the_first_error(storage):
    tandem.init(num_cpus=2)
    t0 = time.monotonic()
    rg = tune.Tuner(
        _fail_first, param_space={"i": tune.grid_search([0, 1, 2])},
        run_config=RunConfig(storage_path=storage, name="ff", verbose=0,
                             failure_config=FailureConfig(fail_fast=True)),
    ).fit()
    assert time.monotonic() - t0 < 40
    assert rg.num_errors == 1
    assert "trial zero breaks" in str(rg.errors[0])


@pytest.mark.slow
def test_fail_fast_raise_raises_the_trial_error(storage):
    tandem.init(num_cpus=2)
    t0 = time.monotonic()
    with pytest.raises(Exception, match="trial zero breaks"):
        tune.Tuner(
            _fail_first, param_space={"i": tune.grid_search([0, 1, 2])},
            run_config=RunConfig(storage_path=storage, name="ffr", verbose=0,
                                 failure_config=FailureConfig(fail_fast="raise")),
        ).fit()
    assert time.monotonic() - t0 < 40


# -- RunConfig(stop={"done": True}) ---------------------------------------------------------------
def test_stop_dict_accepts_booleans_and_compares_as_ray():
    from tandem.tune.stopper import make_stopper

    s = make_stopper({"done": True, "training_iteration": 10, "nested/acc": 0.9})
    assert s is not None
    assert not s("t", {"done": False, "training_iteration": 3})
    assert s("t", {"done": True, "training_iteration": 3})
    assert s("t", {"training_iteration": 10})
    assert s("t", {"training_iteration": 1, "nested": {"acc": 0.95}})
    with pytest.raises(ConfigError, match="must be a number or a bool"):
        make_stopper({"loss": "low"})


def _until_done(config):
    step = 0
    while True:  # as in Ray's pbt_function: the stop criteria end it
        step += 1
        tune.report({"step": step, "done": step >= 4})
        time.sleep(0.01)


@pytest.mark.slow
def test_stop_done_true_ends_an_endless_trial(storage):
    tandem.init(num_cpus=2)
    rg = tune.Tuner(_until_done, param_space={},
                    run_config=RunConfig(storage_path=storage, name="done", verbose=0,
                                         stop={"done": True})).fit()
    assert rg.num_errors == 0
    assert rg[0].metrics["done"] is True
    assert rg[0].metrics["step"] == 4


# -- tandem.init keywords of ray.init ------------------------------------------------------------
def test_init_takes_ray_logging_keywords():
    import logging

    tandem.init(num_cpus=1, configure_logging=True, logging_level="debug")
    assert logging.getLogger("tandem").level == logging.DEBUG
    tandem.shutdown()
    tandem.init(num_cpus=1, configure_logging=False, log_to_driver=False, include_dashboard=False)
    tandem.shutdown()
    with pytest.raises(ConfigError, match="logging_level='loud'"):
        tandem.init(logging_level="loud")
    with pytest.raises(ConfigError, match="object_store_memory"):
        tandem.init(object_store_memory=10**9)
    with pytest.raises(ConfigError, match="local_mode"):
        tandem.init(local_mode=True)
    # every other ray.init parameter: refused, saying what to do instead
    for key, value in (("labels", {"a": "b"}), ("dashboard_host", "0.0.0.0"),
                       ("dashboard_port", 8265), ("job_config", object()), ("namespace", "n"),
                       ("enable_resource_isolation", True), ("cgroup_path", "/sys/x"),
                       ("system_reserved_cpu", 1.0), ("system_reserved_memory", 10**9),
                       ("proxy_server_url", "http://x")):
        with pytest.raises(ConfigError, match=f"{key}=.*no equivalent here"):
            tandem.init(**{key: value})
    from ray import LoggingConfig as RayLoggingConfig

    tandem.init(num_cpus=1, logging_config=RayLoggingConfig(log_level="WARNING"))
    assert logging.getLogger("tandem").level == logging.WARNING
    tandem.shutdown()
    with pytest.raises(ConfigError, match="text encoding only"):
        tandem.init(logging_config=RayLoggingConfig(encoding="JSON"))
    with pytest.raises(ConfigError, match="tandem server start"):
        tandem.init(include_dashboard=True)
    with pytest.raises(ConfigError, match="unknown keyword"):
        tandem.init(num_cpu=2)
    assert not tandem.is_initialized()


LOG_TO_DRIVER = textwrap.dedent("""
    import sys
    import tandem
    from tandem.train import DataParallelTrainer, RunConfig

    def loop():
        print("WORKER-SAYS-HELLO", flush=True)

    tandem.init(num_cpus=1, log_to_driver=sys.argv[1] == "1")
    DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[2])).fit()
    print("FIT-DONE")
""")


@pytest.mark.slow
def test_log_to_driver_false_keeps_worker_output_off_the_console(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text(LOG_TO_DRIVER)
    outs = {}
    for flag in ("1", "0"):
        p = subprocess.run([sys.executable, str(script), flag, str(tmp_path / "r")],
                           capture_output=True, text=True, timeout=120, check=False)
        assert p.returncode == 0, p.stderr[-2000:]
        outs[flag] = p.stdout + p.stderr
        assert "FIT-DONE" in outs[flag]
    assert "WORKER-SAYS-HELLO" in outs["1"]
    assert "WORKER-SAYS-HELLO" not in outs["0"]


# -- ScalingConfig holding a search space ----------------------------------------------------------
def test_scaling_config_with_a_search_space_is_for_a_tuner_only(storage):
    sc = ScalingConfig(num_workers=tune.grid_search([1, 2]))
    assert sc.search_space_fields() == ["num_workers"]
    assert ScalingConfig(num_workers=tune.choice([1, 2])).search_space_fields() == ["num_workers"]
    with pytest.raises(ConfigError, match="holds a search space"):
        DataParallelTrainer(lambda: None, scaling_config=sc,
                            run_config=RunConfig(storage_path=storage)).fit()
    with pytest.raises(ConfigError):
        ScalingConfig(num_workers=0)  # plain values are still checked


# -- train.torch.enable_reproducibility ------------------------------------------------------------
def _seeded_loop(config):
    import torch

    from tandem.train.torch import enable_reproducibility, prepare_data_loader

    enable_reproducibility(config["seed"])
    model = torch.nn.Linear(8, 1)
    loader = prepare_data_loader(torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.randn(32, 8)), batch_size=8, shuffle=True))
    total = sum(float(model(b[0]).sum()) for b in loader)
    train.report({"out": total, "rand": float(torch.rand(1))})


@pytest.mark.slow
def test_enable_reproducibility_makes_runs_repeat(storage):
    from tandem.train.torch import TorchTrainer

    tandem.init(num_cpus=2)
    got = []
    for seed in (5, 5, 6):
        r = TorchTrainer(_seeded_loop, train_loop_config={"seed": seed},
                         scaling_config=ScalingConfig(num_workers=2),
                         run_config=RunConfig(storage_path=storage, verbose=0)).fit()
        got.append(r.metrics)
    assert got[0] == got[1]
    assert got[0] != got[2]


# -- a resumed trial's iteration count (item 3) ---------------------------------------------------


class _PauseOnceAt3(FIFOScheduler):
    """Pauses every trial once, at its result with training_iteration 3, then resumes it."""

    def __init__(self) -> None:
        super().__init__()
        self.paused: list[str] = []
        self.waiting: list[str] = []

    def on_trial_result(self, trial, result):
        if result["training_iteration"] == 3 and trial.trial_id not in self.paused:
            self.paused.append(trial.trial_id)
            self.waiting.append(trial)
            return Decision.pause("pause once")
        return Decision.continue_()

    def suggest(self):
        from tandem.tune.trial import TrialStatus

        if self.waiting and self.waiting[0].status is TrialStatus.PAUSED:
            return TrialSuggestion.resume(self.waiting.pop(0).trial_id)
        return None


def _steps(config):
    import tempfile

    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "step")) as f:
            start = int(f.read())
    for step in range(start, 8):
        gate = os.path.join(config["dir"], f"go_{step}")
        deadline = time.monotonic() + 30
        # each step waits for the driver to have seen the previous result, so the pause
        # at iteration 3 lands while the trial is still running
        while step >= 3 and not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.01)
        if config["checkpoint"]:
            with tempfile.TemporaryDirectory() as d:
                with open(os.path.join(d, "step"), "w") as f:
                    f.write(str(step + 1))
                tune.report({"step": step}, checkpoint=tune.Checkpoint.from_directory(d))
        else:
            tune.report({"step": step})


class _OpenGates(tune.Callback):
    def __init__(self, d: str) -> None:
        self.d = d

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["training_iteration"] != 3 or os.path.exists(os.path.join(self.d, "p")):
            for s in range(8):
                open(os.path.join(self.d, f"go_{s}"), "w").close()
        if result["training_iteration"] == 3:
            open(os.path.join(self.d, "p"), "w").close()


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_resumed_trial_counts_iterations_as_ray(storage, tmp_path, checkpoint):
    tandem.init(num_cpus=1)
    gates = tmp_path / "gates"
    gates.mkdir()
    sched = _PauseOnceAt3()
    rg = tune.Tuner(
        _steps, param_space={"dir": str(gates), "checkpoint": checkpoint},
        tune_config=tune.TuneConfig(scheduler=sched),
        run_config=RunConfig(storage_path=storage, name=f"resume{checkpoint}", verbose=0,
                             callbacks=[_OpenGates(str(gates))]),
    ).fit()
    assert sched.paused, "the trial was never paused"
    assert rg.num_errors == 0
    its = [r["training_iteration"] for r in _rows(rg[0].path)]
    steps = [r["step"] for r in _rows(rg[0].path)]
    # without a checkpoint the function starts over and so does the count (Ray's Trainable
    # resets its iteration); with one it goes on from the checkpoint's iteration. Either way
    # the rows of the new start are appended to result.json, as Ray's JsonLoggerCallback
    # does: without a checkpoint the first three rows are there twice.
    again = [] if checkpoint else [1, 2, 3]
    assert its == again + list(range(1, 9)), its
    assert steps == [i - 1 for i in again] + list(range(8)), steps


# -- default experiment names (item 5) -----------------------------------------------------------
def _one_report(config):
    tune.report({"x": 1})


@pytest.mark.slow
def test_two_unnamed_experiments_in_one_second_get_their_own_folders(storage):
    tandem.init(num_cpus=2)
    paths = []
    for _ in range(3):
        rg = tune.Tuner(_one_report, run_config=RunConfig(storage_path=storage, verbose=0)).fit()
        paths.append(rg.experiment_path)
    assert len(set(paths)) == 3, paths
    assert all(os.path.basename(p).startswith("_one_report_") for p in paths)


# -- a decision takes effect at the result that triggered it (item 2) ---------------------------
def _tight(config):
    for i in range(100_000):
        tune.report({"i": i})


@pytest.mark.slow
def test_stop_at_iteration_k_leaves_exactly_k_rows(storage):
    tandem.init(num_cpus=2)
    rg = tune.Tuner(_tight, param_space={"x": tune.grid_search([1, 2])},
                    run_config=RunConfig(storage_path=storage, name="k", verbose=0,
                                         stop={"training_iteration": 8})).fit()
    for r in rg:
        assert [row["training_iteration"] for row in _rows(r.path)] == list(range(1, 9))
        assert len(r.metrics_dataframe) == 8
        assert r.metrics["i"] == 7


class _PauseAt(FIFOScheduler):
    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k
        self.decided: list[int] = []

    def on_trial_result(self, trial, result):
        if result["training_iteration"] == self.k and not self.decided:
            self.decided.append(self.k)
            return Decision.stop("decided at k")
        return Decision.continue_()


@pytest.mark.slow
def test_a_scheduler_decision_at_k_takes_effect_at_k(storage):
    tandem.init(num_cpus=1)
    sched = _PauseAt(5)
    rg = tune.Tuner(_tight, tune_config=tune.TuneConfig(scheduler=sched),
                    run_config=RunConfig(storage_path=storage, name="sk", verbose=0)).fit()
    assert sched.decided == [5]
    assert [row["training_iteration"] for row in _rows(rg[0].path)] == [1, 2, 3, 4, 5]
