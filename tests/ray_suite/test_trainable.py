"""The class API, as the public parts of Ray's python/ray/tune/tests/test_trainable.py check
it (written for this suite, not copied from Ray): a ``Trainable`` used directly counts its
iterations in ``train()``'s results, and what ``save()`` returns restores the state and the
iteration count into a fresh instance; in a run, ``checkpoint_at_end`` keeps a checkpoint.

Left out: Ray's auto-filled result keys of a directly called ``train()`` (``date``, ``pid``,
``node_ip``, ...), and the tests of checkpoint paths, remote storage and syncing."""

from __future__ import annotations

import json
import os

from tests.ray_suite.swap import tune


class Counter(tune.Trainable):
    def setup(self, config):
        self.n = config.get("start", 0)

    def step(self):
        self.n += 1
        return {"n": self.n, "done": self.n >= self.config.get("stop_at", 10**9)}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json"), "w") as f:
            json.dump(self.n, f)

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n.json")) as f:
            self.n = json.load(f)


def test_train_save_restore_directly():
    first = Counter(config={"start": 5})
    try:
        results = [first.train() for _ in range(2)]
        assert [r["n"] for r in results] == [6, 7]
        assert [r["training_iteration"] for r in results] == [1, 2]
        saved = first.save()
    finally:
        first.stop()
    fresh = Counter(config={})
    try:
        fresh.restore(saved)
        assert fresh.iteration == 2
        result = fresh.train()
        assert result["n"] == 8 and result["training_iteration"] == 3
    finally:
        fresh.stop()


def test_checkpoint_at_end_in_a_run():
    [result] = tune.Tuner(
        Counter, param_space={"start": 0, "stop_at": 3},
        run_config=tune.RunConfig(
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True)),
    ).fit()
    assert result.metrics["n"] == 3 and result.metrics["training_iteration"] == 3
    with result.checkpoint.as_directory() as d, open(os.path.join(d, "n.json")) as f:
        assert json.load(f) == 3
