"""The older ``tune.run`` entry point and its ``ExperimentAnalysis``, with real trials."""

from __future__ import annotations

import os
import signal

import pytest

import tandem
from tandem import tune
from tandem._core.errors import ConfigError
from tandem.train import Checkpoint, Result
from tandem.tune.schedulers import ASHAScheduler


@pytest.fixture(autouse=True)
def _cluster():
    tandem.init(num_cpus=2)
    yield


class Accumulator(tune.Trainable):
    """Adds ``rate`` each step; the trial with rate 3 SIGKILLs its own worker once,
    at step 7, after the checkpoint of step 5."""

    def _setup(self, config):
        self.value = 0
        self.restored_value = None

    def _train(self):
        step = self.iteration + 1
        if self.config["rate"] == 3 and step == 7:
            marker = os.path.join(self.config["kill_dir"], "killed_once")
            if not os.path.exists(marker):
                open(marker, "w").close()
                os.kill(os.getpid(), signal.SIGKILL)
        self.value += self.config["rate"]
        return {"score": self.value, "restored_value": self.restored_value}

    def _save(self, checkpoint_dir):
        return {"value": self.value}

    def _restore(self, checkpoint):
        self.value = checkpoint["value"]
        self.restored_value = checkpoint["value"]


@pytest.mark.timeout(60)
def test_trainable_class_with_asha_checkpoints_and_a_killed_trial(storage, tmp_path):
    analysis = tune.run(
        Accumulator,
        config={"rate": tune.grid_search([1, 2, 3]), "kill_dir": str(tmp_path)},
        stop={"training_iteration": 10},
        metric="score", mode="max",
        scheduler=ASHAScheduler(max_t=10, grace_period=4, reduction_factor=3),
        checkpoint_freq=5, keep_checkpoints_num=2, checkpoint_score_attr="score",
        max_failures=1, storage_path=storage, name="acc", verbose=0,
    )
    assert os.path.exists(os.path.join(tmp_path, "killed_once"))  # it really was killed
    assert isinstance(analysis, tune.ExperimentAnalysis) and len(analysis.trials) == 3
    by_rate = {t.config["rate"]: t for t in analysis.trials}
    for t in analysis.trials:
        assert t.status == "TERMINATED" and t.error is None
        assert t.last_result["trial_id"] == t.trial_id
        # the running sum is right in every trial, the killed one included
        assert t.last_result["score"] == t.config["rate"] * t.last_result["training_iteration"]
    killed = by_rate[3]
    assert killed.last_result["training_iteration"] == 10
    assert killed.last_result["restored_value"] == 15  # _restore got step 5's checkpoint
    assert by_rate[1].last_result["restored_value"] is None

    assert analysis.get_best_config(metric="score", mode="max")["rate"] == 3
    assert analysis.best_config["rate"] == 3
    assert analysis.best_result["score"] == 30
    assert analysis.get_best_trial() == killed
    # ASHA decides which trials stop early by timing; each trial's lowest report does not
    assert analysis.get_best_config(metric="score", mode="min", scope="all")["rate"] == 1

    # kept checkpoints: step 5 (from before the kill) and step 10
    best_ckpt = analysis.get_best_checkpoint(killed, metric="score", mode="max")
    assert isinstance(best_ckpt, Checkpoint) and best_ckpt.path.endswith("checkpoint_000010")
    worst = analysis.get_best_checkpoint(killed.trial_id, metric="score", mode="min", return_path=True)
    assert worst.endswith("checkpoint_000005")
    assert analysis.best_checkpoint.path == best_ckpt.path
    assert killed.checkpoint.path == best_ckpt.path

    df = analysis.dataframe()
    assert len(df) == 3
    assert {"trial_id", "config/rate", "score", "training_iteration"} <= set(df.columns)
    row = df[df["trial_id"] == killed.trial_id].iloc[0]
    assert row["score"] == 30 and row["config/rate"] == 3 and row["training_iteration"] == 10
    first = analysis.dataframe(metric="score", mode="min")  # each trial's lowest report
    assert sorted(first["score"]) == [1, 2, 3]
    assert analysis.results_df.loc[killed.trial_id, "score"] == 30
    reports = analysis.trial_dataframes[killed.trial_id]
    assert list(reports["score"])[-1] == 30 and 5 in list(reports["training_iteration"])

    # the same experiment, loaded from its folder
    again = tune.ExperimentAnalysis(os.path.join(storage, "acc"), default_metric="score",
                                    default_mode="max")
    assert again.best_config["rate"] == 3
    assert [t.trial_id for t in again.trials] == [t.trial_id for t in analysis.trials]


def report_kwargs(config):
    runs = os.path.join(config["dir"], f"runs_{config['x']}")
    with open(runs, "a") as f:
        f.write("x")
    with open(runs) as f:
        first_run = f.read() == "x"
    if config["x"] == 2 and first_run:
        raise RuntimeError("fails on its first run")
    for i in range(3):
        tune.report(loss=(config["x"] - 1) ** 2 + 1 / (i + 1), step=i)  # the older keywords


@pytest.mark.timeout(60)
def test_function_with_keyword_reports_failure_and_resume(storage, tmp_path):
    kwargs = {"config": {"x": tune.grid_search([0, 1, 2]), "dir": str(tmp_path)},
              "storage_path": storage, "name": "kw", "verbose": 0}
    with pytest.raises(tune.TuneError, match="raise_on_failed_trial=False"):
        tune.run(report_kwargs, **kwargs)

    analysis = tune.run(report_kwargs, resume="AUTO+RESTART_ERRORED", **kwargs)
    # only the failed trial ran again; the finished ones were kept
    assert [(tmp_path / f"runs_{x}").read_text() for x in (0, 1, 2)] == ["x", "x", "xx"]
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    assert analysis.get_best_config(metric="loss", mode="min")["x"] == 1
    assert analysis.get_best_trial("loss", "min", scope="all").config["x"] == 1
    df = analysis.dataframe()
    assert len(df) == 3 and {"loss", "step", "trial_id", "config/x"} <= set(df.columns)
    assert set(df["step"]) == {2}

    # no metric given to tune.run: the properties say how to fix it
    with pytest.raises(ConfigError, match=r"tune.run\(\.\.\., metric='loss', mode='min'\)"):
        _ = analysis.best_config
    with pytest.raises(ConfigError, match="needs a mode"):
        analysis.dataframe(metric="loss")
    assert analysis.get_best_checkpoint(analysis.trials[0], metric="loss", mode="min") is None


def test_arguments_that_cannot_work():
    with pytest.raises(ConfigError, match="No trainable is registered as"):
        tune.run("my_trainable")
    with pytest.raises(ConfigError, match="resume='SOMETIMES'"):
        tune.run(report_kwargs, resume="SOMETIMES")
    with pytest.raises(ConfigError, match="mode"):
        tune.run(report_kwargs, metric="loss", mode="lowest")
    with pytest.raises(ConfigError, match="storage_path"):
        tune.run(report_kwargs, local_dir="/tmp/a", storage_path="/tmp/b")
    with pytest.raises(ConfigError, match="already wrapped"):
        tune.run(tune.with_resources(report_kwargs, {"CPU": 1}), resources_per_trial={"cpu": 1})


def test_analysis_over_a_result_grid_without_processes(tmp_path):
    grid = tune.ResultGrid(
        [Result(metrics={"acc": 0.5, "training_iteration": 2}, checkpoint=None,
                path=str(tmp_path / "a"), config={"lr": 0.1}),
         Result(metrics={"acc": 0.9, "training_iteration": 2}, checkpoint=None,
                path=str(tmp_path / "b"), config={"lr": 0.2}, error=RuntimeError("late"))],
        str(tmp_path), trial_ids=["t0", "t1"])
    analysis = tune.ExperimentAnalysis(grid, default_metric="acc", default_mode="max")
    assert [t.status for t in analysis.trials] == ["TERMINATED", "ERROR"]
    assert analysis.best_config == {"lr": 0.2}
    assert analysis.get_best_trial(mode="min").trial_id == "t0"
    with pytest.raises(ConfigError, match="scope='best'"):
        analysis.get_best_trial(scope="best")
    with pytest.raises(ConfigError, match="No trial 'nope'"):
        analysis.get_best_checkpoint("nope")
    assert list(analysis.results_df.index) == ["t0", "t1"]
