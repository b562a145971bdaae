"""``ResultGrid``, as Ray's python/ray/tune/tests/test_result_grid.py checks it (public API):
built from ``tune.run``'s analysis or an experiment folder, best results, checkpoints,
dataframes, errors, a moved experiment folder."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pandas as pd
import pyarrow.fs
import pytest

from tests.ray_suite.swap import target, tune

ResultGrid = target("tune.result_grid").ResultGrid
AUTO_RESULT_KEYS = target("tune.result").AUTO_RESULT_KEYS


def _report_with_checkpoint(metrics):
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "checkpoint.json"), "w") as f:
            json.dump(metrics, f)
        tune.report(metrics, checkpoint=tune.Checkpoint.from_directory(d))


def test_result_grid():
    def f(config):
        _report_with_checkpoint({"step": 0})

    analysis = tune.run(f, config={"a": 1})
    result = ResultGrid(analysis)[0]
    assert isinstance(result.checkpoint, tune.Checkpoint)
    assert isinstance(result.metrics, dict)
    assert result.config == {"a": 1}
    with result.checkpoint.as_directory() as d, open(os.path.join(d, "checkpoint.json")) as fp:
        assert json.load(fp) == {"step": 0}


def test_result_grid_metric_mode():
    def f(config):
        for i in range(2):
            _report_with_checkpoint({"step": i})

    analysis = tune.run(f, config={"a": 1}, metric="step", mode="min")
    result = ResultGrid(analysis)[0]
    assert isinstance(result.checkpoint, tune.Checkpoint)
    assert isinstance(result.best_checkpoints, list) and len(result.best_checkpoints) == 2
    assert isinstance(result.metrics_dataframe, pd.DataFrame)
    assert len(result.metrics_dataframe) == 2
    best = min(result.best_checkpoints, key=lambda x: x[1]["step"])[0]
    assert os.path.normpath(result.checkpoint.path) != os.path.normpath(best.path)
    assert result.config == {"a": 1}


def test_result_grid_no_checkpoint():
    def f(config):
        tune.report({"x": 1})

    result = ResultGrid(tune.run(f))[0]
    assert result.checkpoint is None
    assert result.best_checkpoints == []


def test_best_result():
    def f(config):
        for _ in range(2):
            tune.report({"x": config["x"]})

    grid = ResultGrid(tune.run(f, config={"x": tune.grid_search([1, 2])}))
    best = grid.get_best_result(metric="x", mode="max")
    assert best.config["x"] == 2 and best.metrics["x"] == 2
    assert grid.get_best_result(metric="x", mode="min").config["x"] == 1


def test_best_result_checkpoint_history():
    def f(config):
        for i in range(2):
            _report_with_checkpoint({"x": config["x"], "step": i})

    grid = ResultGrid(tune.run(f, config={"x": tune.grid_search([1, 3])}))
    best = grid.get_best_result(metric="x", mode="max")
    assert best.metrics["x"] == 3
    assert len(best.best_checkpoints) == 2
    for i, (checkpoint, metrics) in enumerate(best.best_checkpoints):
        assert isinstance(checkpoint, tune.Checkpoint)
        assert metrics["x"] == 3 and metrics["step"] == i


def test_best_result_no_report():
    def f(config):
        pass

    grid = ResultGrid(tune.run(f, config={"x": tune.grid_search([1, 2])}))
    with pytest.raises(RuntimeError, match="No best trial found"):
        grid.get_best_result(metric="x", mode="max")


def test_result_repr():
    def f(config):
        tune.report({"loss": 1})

    result = tune.Tuner(f, param_space={"x": tune.grid_search([1, 2])}).fit()[0]
    representation = repr(result)
    assert "loss" in representation
    assert not any(key in representation for key in AUTO_RESULT_KEYS)


def test_no_metric_mode():
    def f(config):
        tune.report({"x": 1})

    grid = ResultGrid(tune.run(f, num_samples=2))
    with pytest.raises(ValueError):
        grid.get_best_result()
    with pytest.raises(ValueError):
        grid.get_best_result(metric="x")
    with pytest.raises(ValueError):
        grid.get_best_result(mode="max")


def test_no_metric_mode_one_trial():
    def f(config):
        tune.report({"x": 1})

    results = tune.Tuner(f, tune_config=tune.TuneConfig(num_samples=1)).fit()
    assert results.get_best_result()  # one trial: no metric needed


def test_result_grid_df():
    def f(config):
        for factor in (1, 4, 3):
            tune.report({"metric": config["nested"]["param"] * factor})

    grid = ResultGrid(tune.run(f, config={"nested": {"param": tune.grid_search([1, 2])}}))
    assert len(grid) == 2
    assert sorted(grid.get_dataframe()["metric"]) == [3, 6]
    df = grid.get_dataframe(filter_metric="metric", filter_mode="max")
    assert sorted(df["metric"]) == [4, 8]
    df = grid.get_dataframe(filter_metric="metric", filter_mode="min")
    assert sorted(df["metric"]) == [1, 2]
    assert sorted(df["config/nested/param"]) == [1, 2]


def test_num_errors_terminated():
    def f(config):
        if config["i"] in (1, 3):
            raise ValueError("Test error")
        tune.report({"ok": 1})

    analysis = tune.run(f, config={"i": tune.grid_search([0, 1, 2, 3, 4])},
                        raise_on_failed_trial=False)
    grid = ResultGrid(analysis)
    assert len(grid.errors) == 2 and grid.num_errors == 2
    assert grid.num_terminated == 3
    assert all("Test error" in str(e) for e in grid.errors)


@pytest.mark.slow
@pytest.mark.parametrize("checkpoint_interval", [1, 2])
def test_result_grid_moved_experiment_path(tmp_path, checkpoint_interval):
    def train_func(config):
        data = {"it": 0}
        checkpoint = tune.get_checkpoint()
        if checkpoint:
            with checkpoint.as_directory() as d, open(os.path.join(d, "data.json")) as fp:
                data = json.load(fp)
        while True:
            data["it"] += 1
            if data["it"] % config["checkpoint_interval"] == 0:
                with tempfile.TemporaryDirectory() as d:
                    with open(os.path.join(d, "data.json"), "w") as fp:
                        json.dump(data, fp)
                    tune.report(data, checkpoint=tune.Checkpoint.from_directory(d))
            else:
                tune.report(data)

    total_iters = 6
    grid = tune.Tuner(
        train_func,
        param_space={"checkpoint_interval": checkpoint_interval},
        run_config=tune.RunConfig(
            name="exp_dir", storage_path=str(tmp_path / "ray_results"),
            stop={"it": total_iters},
            checkpoint_config=tune.CheckpointConfig(num_to_keep=total_iters)),
    ).fit()
    assert grid[0].checkpoint
    assert len(grid[0].best_checkpoints) == total_iters // checkpoint_interval
    shutil.move(str(tmp_path / "ray_results"), str(tmp_path / "moved_ray_results"))
    grid = ResultGrid(tune.ExperimentAnalysis(str(tmp_path / "moved_ray_results" / "exp_dir")))
    assert grid[0].checkpoint
    for checkpoint, _ in grid[0].best_checkpoints:
        assert "moved_ray_results" in checkpoint.path
    assert len(grid[0].best_checkpoints) == total_iters // checkpoint_interval


def test_experiment_path_and_filesystem(tmp_path):
    def f(config):
        tune.report({"x": 1})

    grid = tune.Tuner(f, run_config=tune.RunConfig(name="e", storage_path=str(tmp_path))).fit()
    assert grid.experiment_path == str(tmp_path / "e")
    assert isinstance(grid.filesystem, pyarrow.fs.FileSystem)
    assert isinstance(grid[0].filesystem, pyarrow.fs.FileSystem)
    assert grid[0].path.startswith(grid.experiment_path)
