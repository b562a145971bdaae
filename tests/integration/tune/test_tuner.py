"""Tuning with real trials: every trial is a train job with its own worker process(es)."""

from __future__ import annotations

import json
import os
import tempfile
import time

import pytest

import tandem
from tandem import train, tune
from tandem._core.errors import ConfigError, ResourcesUnavailableError
from tandem.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from tandem.tune.schedulers import ASHAScheduler, PopulationBasedTraining
from tests.processes import no_workers_left

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _cluster():
    tandem.init(num_cpus=2)
    yield


def quadratic(config):
    for i in range(config.get("steps", 3)):
        tune.report({"loss": (config["x"] - 0.3) ** 2 + 1.0 / (i + 1), "step": i})


def test_grid_times_num_samples_and_best_result(storage):
    rg = tune.Tuner(
        quadratic,
        param_space={"x": tune.uniform(0, 1), "y": tune.grid_search(["a", "b", "c"]),
                     "nested": {"z": tune.choice([1, 2])}},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2, seed=7),
        run_config=RunConfig(storage_path=storage, name="grid", verbose=0),
    ).fit()
    assert len(rg) == 6 and rg.num_errors == 0 and rg.num_terminated == 6
    assert sorted(r.config["y"] for r in rg) == ["a", "a", "b", "b", "c", "c"]
    best = rg.get_best_result()
    assert best.metrics["loss"] == min(r.metrics["loss"] for r in rg)
    assert best.metrics["training_iteration"] == 3
    df = rg.get_dataframe()
    assert {"config/x", "config/y", "config/nested/z", "trial_id", "loss"} <= set(df.columns)
    assert len(df) == 6
    assert os.path.exists(os.path.join(storage, "grid", "experiment_state.json"))
    for r in rg:  # per-trial files written by the train layer
        assert os.path.exists(os.path.join(r.path, "result.json"))
        assert os.path.exists(os.path.join(r.path, "progress.csv"))
        assert json.load(open(os.path.join(r.path, "params.json")))["y"] == r.config["y"]
    # the same seed gives the same configs
    rg2 = tune.Tuner(
        quadratic,
        param_space={"x": tune.uniform(0, 1), "y": tune.grid_search(["a", "b", "c"]),
                     "nested": {"z": tune.choice([1, 2])}},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=2, seed=7),
        run_config=RunConfig(storage_path=storage, name="grid2", verbose=0),
    ).fit()
    assert sorted(r.config["x"] for r in rg) == sorted(r.config["x"] for r in rg2)


def curve(config):
    import time

    for i in range(1, 28):
        time.sleep(0.002)
        tune.report({"loss": config["q"] * 10 / i})


def test_asha_stops_bad_trials_early(storage):
    rg = tune.Tuner(
        curve,
        param_space={"q": tune.grid_search([1, 2, 3, 4, 5, 6, 7, 8, 9])},
        tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=ASHAScheduler(
            max_t=27, grace_period=1, reduction_factor=3)),
        run_config=RunConfig(storage_path=storage, verbose=0),
    ).fit()
    iters = {r.config["q"]: r.metrics["training_iteration"] for r in rg}
    assert iters[1] == 27  # the best trial runs to max_t
    assert sum(iters.values()) < 9 * 27 * 0.6  # most trials were stopped at a rung
    assert min(iters.values()) in (1, 3, 9)  # stops happen at rungs
    assert rg.get_best_result().config["q"] == 1


def pbt_trainable(config):
    ckpt = tune.get_checkpoint()
    state = {"origin": tune.get_context().get_trial_id(), "steps": 0}
    if ckpt is not None:
        with ckpt.as_directory() as d:
            state = json.load(open(os.path.join(d, "state.json")))
    while True:
        time.sleep(0.05)  # both trials must be running side by side for PBT to compare them
        state["steps"] += 1
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump(state, f)
            tune.report({"score": config["lr"] * state["steps"], "origin": state["origin"],
                         "lr": config["lr"]}, checkpoint=Checkpoint.from_directory(d))


def test_pbt_exploit_loads_the_donors_checkpoint(storage):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration", perturbation_interval=4,
        hyperparam_mutations={"lr": [0.001, 0.01, 0.1, 1.0]}, quantile_fraction=0.5, seed=0)
    rg = tune.Tuner(
        pbt_trainable,
        param_space={"lr": tune.grid_search([0.001, 1.0])},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=pbt),
        # 20 steps, a chance to exploit every 4: enough even when one trial starts late
        run_config=RunConfig(storage_path=storage, verbose=0, stop={"training_iteration": 20}),
    ).fit()
    assert rg.num_errors == 0
    by_lr = {r.config["lr"]: r for r in rg}
    weak = [r for r in rg if r.metrics["origin"] != r.metrics["trial_id"]]
    # the weak trial restarted from the strong trial's checkpoint: it carries the donor's id
    assert weak, f"no exploit happened: {[r.metrics for r in rg]}"
    donor_ids = {r.metrics["trial_id"] for r in rg}
    assert weak[0].metrics["origin"] in donor_ids
    assert weak[0].metrics["training_iteration"] == 20
    # the exploited trial runs on with a config mutated within hyperparam_mutations
    assert weak[0].config["lr"] in (0.001, 0.01, 0.1, 1.0)
    assert weak[0].metrics["lr"] == weak[0].config["lr"]
    assert set(by_lr) <= {0.001, 0.01, 0.1, 1.0}


class Counter(tune.Trainable):
    def _setup(self, config):
        self.count = config["start"]

    def _train(self):
        self.count += 1
        return {"count": self.count}

    def _save(self, checkpoint_dir):
        return {"count": self.count}

    def _restore(self, checkpoint):
        self.count = checkpoint["count"]


def test_trainable_class_with_underscore_names(storage):
    rg = tune.Tuner(
        Counter,
        param_space={"start": tune.grid_search([0, 100])},
        run_config=RunConfig(storage_path=storage, verbose=0, stop={"training_iteration": 5},
                             checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=2,
                                                                     checkpoint_at_end=True)),
    ).fit()
    counts = sorted(r.metrics["count"] for r in rg)
    assert counts == [5, 105]
    for r in rg:
        assert r.checkpoint is not None and r.checkpoint.path.endswith("checkpoint_000005")


def test_trainer_instance_is_tuned_each_trial_a_gang(storage):
    def loop(config):
        ctx = train.get_context()
        train.report({"ws": ctx.get_world_size(), "lr": config["lr"], "base": config["base"]})

    trainer = train.DataParallelTrainer(loop, train_loop_config={"base": 1, "lr": 0.0},
                                        scaling_config=ScalingConfig(num_workers=1))
    rg = tune.Tuner(
        trainer,
        param_space={"train_loop_config": {"lr": tune.grid_search([0.1, 0.2])},
                     "scaling_config": {"num_workers": tune.grid_search([1, 2])}},
        run_config=RunConfig(storage_path=storage, verbose=0),
    ).fit()
    seen = sorted((r.metrics["lr"], r.metrics["ws"], r.metrics["base"]) for r in rg)
    assert seen == [(0.1, 1, 1), (0.1, 2, 1), (0.2, 1, 1), (0.2, 2, 1)]


def test_trainer_inside_trial_pattern_on_a_full_cluster(storage):
    from tandem.train.torch import TorchTrainer
    from tandem.tune.integration.ray_train import TuneReportCallback

    def loop(config):
        import torch.distributed as dist

        for i in range(2):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "w"), "w").write(str(i))
                ckpt = (Checkpoint.from_directory(d)
                        if train.get_context().get_world_rank() == 0 else None)
                train.report({"loss": config["lr"] * (2 - i), "world": dist.get_world_size()},
                             checkpoint=ckpt)

    def train_driver_fn(config):
        TorchTrainer(loop, train_loop_config=config, scaling_config=ScalingConfig(num_workers=2),
                     run_config=RunConfig(storage_path=storage,
                                          callbacks=[TuneReportCallback()])).fit()
        return tune.get_context().get_trial_id()

    # 4 trials, each launching a 2-worker job, on a 2-CPU cluster, no max_concurrent_trials.
    rg = tune.Tuner(train_driver_fn, param_space={"lr": tune.grid_search([0.1, 0.2, 0.3, 0.4])},
                    tune_config=tune.TuneConfig(metric="loss", mode="min"),
                    run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    assert rg.num_errors == 0 and len(rg) == 4
    for r in rg:
        assert r.metrics["world"] == 2
        assert r.checkpoint is not None and r.checkpoint.path.endswith("checkpoint_000002")
        assert open(os.path.join(r.checkpoint.path, "w")).read() == "1"
    assert rg.get_best_result().config["lr"] == 0.1
    # The same driver function runs standalone, outside any trial.
    assert train_driver_fn({"lr": 0.5}) is None


def flaky(config):
    marker = os.path.join(config["dir"], f"failed_{config['id']}")
    ckpt = tune.get_checkpoint()
    start = 0
    if ckpt is not None:
        start = int(open(os.path.join(ckpt.path, "i")).read())
    for i in range(start, 6):
        if config["id"] == "always":
            raise RuntimeError("this trial always fails")
        if i == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("transient")
        with tempfile.TemporaryDirectory() as d:
            open(os.path.join(d, "i"), "w").write(str(i + 1))
            tune.report({"i": i, "resumed_at": start}, checkpoint=Checkpoint.from_directory(d))


def test_failing_trials_retry_from_checkpoint_and_do_not_stop_others(storage, tmp_path):
    rg = tune.Tuner(
        flaky,
        param_space={"id": tune.grid_search(["once", "always", "fine"]), "dir": str(tmp_path)},
        run_config=RunConfig(storage_path=storage, verbose=0,
                             failure_config=FailureConfig(max_failures=1)),
    ).fit()
    by_id = {r.config["id"]: r for r in rg}
    assert by_id["once"].error is None and by_id["once"].metrics["i"] == 5
    assert by_id["once"].metrics["resumed_at"] == 3  # retried from its checkpoint
    assert by_id["fine"].error is None
    assert rg.num_errors == 1
    err = by_id["always"].error
    assert isinstance(err, train.TrainingFailedError) and "this trial always fails" in str(err)
    assert "Traceback" in err.worker_traceback


def test_stop_criteria_and_time_budget(storage):
    def forever(config):
        import time

        i = 0
        while True:
            i += 1
            time.sleep(0.01)
            tune.report({"i": i})

    rg = tune.Tuner(forever, param_space={"a": tune.grid_search([1, 2])},
                    run_config=RunConfig(storage_path=storage, verbose=0, stop={"i": 5})).fit()
    assert [r.metrics["i"] for r in rg] == [5, 5]
    rg = tune.Tuner(forever, param_space={"a": tune.grid_search([1, 2])},
                    run_config=RunConfig(storage_path=storage, verbose=0,
                                         stop=lambda trial_id, result: result["i"] >= 3)).fit()
    assert [r.metrics["i"] for r in rg] == [3, 3]
    rg = tune.Tuner(forever, param_space={"a": tune.grid_search([1, 2])},
                    tune_config=tune.TuneConfig(time_budget_s=1.0),
                    run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    assert len(rg) == 2 and all(r.metrics["i"] > 1 for r in rg)
    assert no_workers_left() == []


def test_with_parameters_and_with_resources(storage):
    big = list(range(10000))

    def f(config, data=None):
        tune.report({"n": len(data), "threads": os.environ["OMP_NUM_THREADS"]})

    rg = tune.Tuner(tune.with_resources(tune.with_parameters(f, data=big), {"cpu": 2}),
                    param_space={"a": tune.grid_search([1, 2])},
                    run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    assert [r.metrics["n"] for r in rg] == [10000, 10000]
    assert [r.metrics["threads"] for r in rg] == ["2", "2"]


def test_optuna_search_runs_trials(storage):
    pytest.importorskip("optuna")
    from tandem.tune.search import OptunaSearch

    rg = tune.Tuner(quadratic, param_space={"x": tune.uniform(0, 1)},
                    tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=6,
                                                search_alg=OptunaSearch(seed=0)),
                    run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    assert len(rg) == 6 and rg.num_errors == 0


def test_progress_lines_without_a_terminal(storage, capsys):
    tune.Tuner(quadratic, param_space={"x": tune.grid_search([0.1, 0.2])},
               tune_config=tune.TuneConfig(metric="loss", mode="min"),
               run_config=RunConfig(storage_path=storage, verbose=1)).fit()
    out = capsys.readouterr().out
    lines = [line for line in out.splitlines() if line.startswith("Trial ")]
    # one line per status change (RUNNING, TERMINATED) per trial: never one per result
    assert len(lines) == 4
    assert any("TERMINATED" in line and "loss=" in line for line in lines)
    assert "2 trials finished" in out
    tune.Tuner(quadratic, param_space={"x": 0.1},
               tune_config=tune.TuneConfig(metric="loss", mode="min"),
               run_config=RunConfig(storage_path=storage, verbose=1)).fit()
    assert "tandem: 1 trial finished in " in capsys.readouterr().out


def test_tensorboard_logger_writes_event_files(storage):
    pytest.importorskip("tensorboardX")
    rg = tune.Tuner(quadratic, param_space={"x": 0.5},
                    run_config=RunConfig(storage_path=storage, verbose=0,
                                         callbacks=[tune.TBXLoggerCallback()])).fit()
    assert any(n.startswith("events.out.tfevents") for n in os.listdir(rg[0].path))


# -- bad input: a clear error before any trial starts ----------------------------------------

def test_bad_inputs(storage):
    rc = RunConfig(storage_path=storage, verbose=0)
    with pytest.raises(ConfigError, match="train_loop_config/lr"):
        tune.Tuner(quadratic, param_space={"train_loop_config": {"lr": tune.uniform}},
                   run_config=rc).fit()
    with pytest.raises(ConfigError, match="mode"):
        tune.TuneConfig(metric="loss", mode="minimize")
    with pytest.raises(ConfigError, match="metric"):
        tune.Tuner(quadratic, param_space={"x": 0.1},
                   tune_config=tune.TuneConfig(scheduler=ASHAScheduler()), run_config=rc).fit()
    with pytest.raises(ConfigError, match="'momentum'"):
        tune.Tuner(quadratic, param_space={"x": 0.1},
                   tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=PopulationBasedTraining(
                       hyperparam_mutations={"momentum": [0.1, 0.9]})), run_config=rc).fit()
    with pytest.raises(ResourcesUnavailableError, match="CPU=4"):
        tune.Tuner(tune.with_resources(quadratic, {"CPU": 4}), param_space={"x": 0.1},
                   run_config=rc).fit()
    with pytest.raises(ConfigError, match="num_samples=0"):
        tune.TuneConfig(num_samples=0)
    assert no_workers_left() == []


def test_metric_never_reported(storage):
    def f(config):
        tune.report({"accuracy": 0.5})

    with pytest.raises(tune.TuneError, match=r"'loss'.*reported: \['accuracy'\]"):
        tune.Tuner(f, param_space={"x": tune.grid_search([1, 2])},
                   tune_config=tune.TuneConfig(metric="loss", mode="min", scheduler=ASHAScheduler()),
                   run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    rg = tune.Tuner(f, param_space={"x": 1}, run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    # one trial is the best whatever the metric (Ray's ResultGrid.get_best_result)
    assert rg.get_best_result() is rg[0]
    assert rg.get_best_result(metric="loss", mode="min") is rg[0]
