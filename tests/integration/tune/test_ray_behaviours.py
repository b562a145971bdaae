"""Ray Tune / Train behaviours a Ray script relies on (issue 21, item 7): seeded search,
returned results, should_checkpoint, tune.utils, Result.filesystem / storage_filesystem,
train.get_all_reported_checkpoints. Each failed on the main branch before."""

from __future__ import annotations

import os
import threading

import numpy as np
import pyarrow.fs
import pytest

from tandem import train, tune
from tandem.train import Checkpoint, CheckpointConfig, DataParallelTrainer, ScalingConfig
from tandem.tune.result import DEFAULT_METRIC, SHOULD_CHECKPOINT


def test_qlograndint_and_domain_builders():
    xs = tune.qlograndint(2, 20, 2).sample(size=2000, random_state=0)
    assert set(xs) == set(range(2, 21, 2))  # upper inclusive for q > 1, multiples of q
    assert np.mean(np.array(xs) <= 6) > 0.4  # log scale favours small values
    assert set(tune.qrandint(1, 5, 1).sample(size=500, random_state=0)) == {1, 2, 3, 4}
    from tandem.tune.search.sample import Categorical, Float, Integer

    with pytest.raises(ValueError):
        Float(-4.2, 8.3).normal().uniform()
    with pytest.raises(ValueError):
        Float(None, None).loguniform()
    normal = Float(None, None).normal(10, 2).sample(size=500, random_state=1)
    assert 9 < np.mean(normal) < 11
    q = Float(1e-4, 1e-1).loguniform().quantized(5e-5).sample(size=200, random_state=2)
    assert all(abs(x / 5e-5 - round(x / 5e-5)) < 1e-6 for x in q)
    assert all(-3 <= s < 12 for s in Integer(-3, 12).uniform().sample(size=300))
    assert set(Categorical([1, 2, 3]).uniform().sample(size=100, random_state=3)) == {1, 2, 3}


def _objective(config):
    return {"score": config["x"] * 2}


def _number(config):
    return config["x"]


def test_seeded_search_returned_dict_and_unnamed_metric(tmp_path):
    runs = []
    for _ in range(2):
        np.random.seed(1234)
        grid = tune.Tuner(_objective, param_space={"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])},
                          tune_config=tune.TuneConfig(num_samples=2),
                          run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
        runs.append(sorted((r.config["g"], r.config["x"]) for r in grid))
        # the returned dict is the trial's result
        assert all(r.metrics["score"] == pytest.approx(r.config["x"] * 2) for r in grid)
    assert runs[0] == runs[1]  # np.random.seed makes BasicVariantGenerator reproducible
    # constant_grid_search: the grid points of a pass share the random value
    from tandem.tune.search import BasicVariantGenerator

    grid = tune.Tuner(_objective, param_space={"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(search_alg=BasicVariantGenerator(
                          constant_grid_search=True, random_state=3)),
                      run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    assert len({r.config["x"] for r in grid}) == 1
    # a returned number is the unnamed metric; tune.run(mode=...) ranks by it
    analysis = tune.run(_number, config={"x": tune.grid_search([3, 9, 5])}, mode="max",
                        storage_path=str(tmp_path), verbose=0)
    assert analysis.best_config == {"x": 9}
    assert analysis.best_result[DEFAULT_METRIC] == 9


class _Counter(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "done": self.n >= 4, SHOULD_CHECKPOINT: self.n == 1}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


class _AskAtThree(tune.Callback):
    def on_trial_result(self, iteration, trials, trial, result, **info):
        if result["n"] == 3:
            result[SHOULD_CHECKPOINT] = True


def test_should_checkpoint_from_result_and_callback(tmp_path):
    grid = tune.Tuner(_Counter, run_config=tune.RunConfig(
        storage_path=str(tmp_path), callbacks=[_AskAtThree()], verbose=0,
        checkpoint_config=CheckpointConfig(checkpoint_at_end=False))).fit()
    result = grid[0]
    assert sorted(n for n in os.listdir(result.path) if n.startswith("checkpoint_")) == [
        "checkpoint_000001", "checkpoint_000003"]
    assert [m["n"] for _, m in result.best_checkpoints] == [1, 3]
    # Result.filesystem is a pyarrow filesystem; storage_filesystem takes one
    assert isinstance(result.filesystem, pyarrow.fs.FileSystem)
    with result.filesystem.open_input_stream(os.path.join(result.path, "params.json")) as f:
        assert f.read() == b"{}"
    sub = pyarrow.fs.SubTreeFileSystem(str(tmp_path), pyarrow.fs.LocalFileSystem())
    grid = tune.Tuner(_objective, param_space={"x": 1}, run_config=tune.RunConfig(
        storage_filesystem=sub, storage_path="nested", name="exp", verbose=0)).fit()
    assert grid[0].path.startswith(str(tmp_path / "nested" / "exp"))
    with pytest.raises(ValueError, match="pyarrow.fs.FileSystem"):
        tune.RunConfig(storage_filesystem="s3://bucket", storage_path="x")


def test_tune_utils(capsys):
    from tandem.tune.utils import (
        diagnose_serialization,
        flatten_dict,
        merge_dicts,
        unflattened_lookup,
        validate_save_restore,
    )
    from tandem.tune.utils.mock_trainable import MyTrainableClass

    assert validate_save_restore(MyTrainableClass, config={"width": 1, "height": 1})

    class Forgets(_Counter):
        def load_checkpoint(self, checkpoint):
            pass

    assert validate_save_restore(Forgets)  # iterations resume from the checkpoint's count
    lock = threading.Lock()

    def bad(config):
        print(lock)

    assert diagnose_serialization(bad) == {"lock"}
    assert "FAILED" in capsys.readouterr().out
    assert diagnose_serialization(_objective) is True
    assert flatten_dict({"a": {"b": 1}, "c": 2}) == {"a/b": 1, "c": 2}
    assert unflattened_lookup("a/1/b", {"a": [{}, {"b": 5}]}) == 5
    assert merge_dicts({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}


def _loop(config):
    import tempfile

    seen = []
    for i in range(3):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "x"), "w") as f:
                f.write(str(i))
            train.report({"i": i}, checkpoint=Checkpoint.from_directory(d))
        seen.append([c.metrics["i"] for c in train.get_all_reported_checkpoints()])
    train.report({"seen": seen})


def test_get_all_reported_checkpoints(tmp_path):
    result = DataParallelTrainer(
        _loop, scaling_config=ScalingConfig(num_workers=2),
        run_config=train.RunConfig(storage_path=str(tmp_path), verbose=0,
                                   checkpoint_config=CheckpointConfig(num_to_keep=2))).fit()
    assert result.metrics["seen"] == [[0], [0, 1], [1, 2]]
