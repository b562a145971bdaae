"""Issue 25, item 1: ``TuneConfig(reuse_actors=True)``: the worker process of a trial that
ended runs the next trial (the same pid), with Ray's semantics: a ``Trainable`` class
keeps its instance and gets ``reset_config``, a function trainable starts with fresh
module state; without ``reset_config`` a reused trial fails with Ray's message."""

from __future__ import annotations

import os

from tandem import tune


def _fn(config):
    import reuse_state  # the user's module: imported afresh by every trial

    reuse_state.COUNT += 1
    tune.report({"pid": os.getpid(), "x": config["x"], "count": reuse_state.COUNT})


class _Resettable(tune.Trainable):
    def setup(self, config):
        self.x, self.resets = config["x"], 0

    def step(self):
        return {"pid": os.getpid(), "x": self.x, "resets": self.resets, "done": True}

    def save_checkpoint(self, checkpoint_dir):
        return {"x": self.x}

    def load_checkpoint(self, checkpoint):
        self.x = checkpoint["x"]

    def reset_config(self, new_config):
        self.x = new_config["x"]
        self.resets += 1
        return True


class _NoReset(_Resettable):
    def reset_config(self, new_config):
        return False


def _fit(trainable, xs, reuse, storage):
    grid = tune.Tuner(trainable, param_space={"x": tune.grid_search(xs)},
                      tune_config=tune.TuneConfig(reuse_actors=reuse, max_concurrent_trials=1),
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    return sorted((r.metrics.get("x", -1), r.metrics.get("pid"), r) for r in grid)


def test_reuse_actors_runs_the_next_trial_in_the_same_process(tmp_path, monkeypatch):
    (tmp_path / "reuse_state.py").write_text("COUNT = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    storage = str(tmp_path / "results")

    rows = _fit(_fn, [1, 2, 3], True, storage)
    assert [x for x, _, _ in rows] == [1, 2, 3]  # each trial ran its own config
    assert len({pid for _, pid, _ in rows}) == 1  # in one process
    assert [r.metrics["count"] for _, _, r in rows] == [1, 1, 1]  # with fresh module state
    # without reuse_actors a function trainable's process still runs the next trial
    # (tandem's default), unseen: fresh module state, no TANDEM_REUSED_WORKER
    rows = _fit(_fn, [1, 2], False, storage)
    assert len({pid for _, pid, _ in rows}) == 1
    assert [r.metrics["count"] for _, _, r in rows] == [1, 1]
    # ... unless asked for a fresh process per trial
    monkeypatch.setenv("TANDEM_TRIAL_REUSE", "0")
    assert len({pid for _, pid, _ in _fit(_fn, [1, 2], False, storage)}) == 2
    monkeypatch.delenv("TANDEM_TRIAL_REUSE")

    rows = _fit(_Resettable, [1, 2, 3], True, storage)
    assert [x for x, _, _ in rows] == [1, 2, 3]
    assert len({pid for _, pid, _ in rows}) == 1
    # one instance: set up once, then reset_config for each later trial
    assert sorted(r.metrics["resets"] for _, _, r in rows) == [0, 1, 2]

    rows = _fit(_NoReset, [1, 2], True, storage)
    errors = [str(r.error) for _, _, r in rows if r.error is not None]
    assert len(errors) == 1, errors
    assert "requires reset_config() to be implemented and return True" in errors[0]
