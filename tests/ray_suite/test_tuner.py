"""``Tuner`` and ``Tuner.restore``, as Ray's python/ray/tune/tests/test_tuner.py and
test_tuner_restore.py check them through the public API: fit, get_results, results of
function and class trainables, errors, and resuming an interrupted or failed experiment."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

from tests.ray_suite.swap import tune


def _objective(config):
    for i in range(config.get("steps", 2)):
        tune.report({"score": config["x"] * (i + 1)})


def test_tuner_fit_and_get_results(tmp_path):
    tuner = tune.Tuner(_objective, param_space={"x": tune.grid_search([1, 2, 3])},
                       tune_config=tune.TuneConfig(metric="score", mode="max"),
                       run_config=tune.RunConfig(name="fit", storage_path=str(tmp_path)))
    results = tuner.fit()
    assert len(results) == 3 and results.num_errors == 0
    assert results.get_best_result().config["x"] == 3
    again = tuner.get_results()
    assert sorted(r.metrics["score"] for r in again) == [2, 4, 6]
    assert results.experiment_path == str(tmp_path / "fit")


def test_tuner_num_samples_and_max_concurrent(tmp_path):
    results = tune.Tuner(_objective, param_space={"x": tune.uniform(0, 1)},
                         tune_config=tune.TuneConfig(num_samples=5, max_concurrent_trials=2),
                         run_config=tune.RunConfig(storage_path=str(tmp_path))).fit()
    assert len(results) == 5
    assert len({r.config["x"] for r in results}) == 5


class _Climb(tune.Trainable):
    def setup(self, config):
        self.value = 0

    def step(self):
        self.value += self.config["x"]
        return {"value": self.value, "done": self.iteration >= 2}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "v.json"), "w") as f:
            json.dump(self.value, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "v.json")) as f:
            self.value = json.load(f)


def test_class_trainable(tmp_path):
    results = tune.Tuner(_Climb, param_space={"x": tune.grid_search([1, 5])},
                         run_config=tune.RunConfig(storage_path=str(tmp_path))).fit()
    assert sorted(r.metrics["value"] for r in results) == [3, 15]
    assert all(r.checkpoint is not None for r in results)  # checkpoint at end (class)


def test_errored_trials(tmp_path):
    def flaky(config):
        if config["x"] == 2:
            raise RuntimeError("trial failed on purpose")
        tune.report({"score": config["x"]})

    results = tune.Tuner(flaky, param_space={"x": tune.grid_search([1, 2, 3])},
                         run_config=tune.RunConfig(storage_path=str(tmp_path))).fit()
    assert results.num_errors == 1 and results.num_terminated == 2
    assert "trial failed on purpose" in str(results.errors[0])


def test_fail_fast_raise(tmp_path):
    def fail(config):
        raise ValueError("fail fast")

    with pytest.raises(Exception, match="fail fast"):
        tune.Tuner(fail, param_space={"x": tune.grid_search([1, 2])},
                   run_config=tune.RunConfig(storage_path=str(tmp_path), failure_config=(
                       tune.FailureConfig(fail_fast="raise")))).fit()


def _resumable(config):
    """Counts to 4 with a checkpoint each step; fails once at step 2 while the marker file
    exists (an interruption)."""
    step = 0
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as d, open(os.path.join(d, "step.json")) as f:
            step = json.load(f)
    while step < 4:
        step += 1
        if step == 2 and os.path.exists(config["marker"]):
            raise RuntimeError("interrupted")
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump(step, f)
            tune.report({"step": step, "resumed": checkpoint is not None},
                        checkpoint=tune.Checkpoint.from_directory(d))


@pytest.mark.slow
@pytest.mark.parametrize("how", ["resume_errored", "restart_errored", "neither"])
def test_tuner_restore_errored(tmp_path, how):
    marker = tmp_path / "fail"
    marker.write_text("")
    path = str(tmp_path / "exp")
    results = tune.Tuner(_resumable, param_space={"marker": str(marker)},
                         run_config=tune.RunConfig(name="exp", storage_path=str(tmp_path))).fit()
    assert results.num_errors == 1
    assert tune.Tuner.can_restore(path)
    assert not tune.Tuner.can_restore(str(tmp_path / "nothing"))
    marker.unlink()
    kwargs = {} if how == "neither" else {how: True}
    results = tune.Tuner.restore(path, trainable=_resumable, **kwargs).fit()
    result = results[0]
    if how == "neither":
        assert results.num_errors == 1
    else:
        assert results.num_errors == 0
        assert result.metrics["step"] == 4
        assert result.metrics["resumed"] is (how == "resume_errored")
        steps = list(result.metrics_dataframe["step"])
        assert steps[-1] == 4


def test_tuner_restore_keeps_finished_trials(tmp_path):
    marker = tmp_path / "fail"
    marker.write_text("")
    space = {"marker": tune.grid_search([str(marker), str(tmp_path / "never")])}
    tune.Tuner(_resumable, param_space=space,
               run_config=tune.RunConfig(name="exp", storage_path=str(tmp_path))).fit()
    marker.unlink()
    results = tune.Tuner.restore(str(tmp_path / "exp"), trainable=_resumable,
                                 resume_errored=True).fit()
    assert results.num_errors == 0
    assert sorted(r.metrics["resumed"] for r in results) == [False, True]
    assert all(r.metrics["step"] == 4 for r in results)
