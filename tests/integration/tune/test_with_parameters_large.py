"""Issue 21, item 3: ``tune.with_parameters`` with a large object (a 200 MB NumPy array):
pickled once and shared through one file that every trial maps, not pickled per trial."""

from __future__ import annotations

import gc
import os
import time

import cloudpickle
import numpy as np
import pytest

import tandem
from tandem import tune
from tandem.train import RunConfig

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def trainable(config, data=None):
    tune.report({"sum": float(data[:: 1 << 16].sum()), "n": int(data.size),
                 "zero_copy": not data.flags.owndata, "pid": os.getpid()})


def test_200mb_array_is_shared_not_pickled_per_trial(storage):
    data = np.arange(25_000_000, dtype=np.float64)  # 200 MB
    t0 = time.monotonic()
    bound = tune.with_parameters(trainable, data=data)
    shipped = cloudpickle.dumps(bound)
    bind_s = time.monotonic() - t0
    assert len(shipped) < 64 << 10, len(shipped)  # what each trial carries: a file reference
    path = bound._shared.path
    assert os.path.getsize(path) >= data.nbytes

    tandem.init(num_cpus=2)
    t0 = time.monotonic()
    grid = tune.Tuner(
        bound, param_space={"i": tune.grid_search([0, 1, 2, 3])},
        run_config=RunConfig(storage_path=storage, name="with_params", verbose=0),
    ).fit()
    run_s = time.monotonic() - t0
    assert grid.num_errors == 0, [r.error for r in grid]
    expected = float(data[:: 1 << 16].sum())
    for r in grid:
        assert r.metrics["sum"] == expected and r.metrics["n"] == data.size
        assert r.metrics["zero_copy"]  # the trial's array is the shared file's pages
    print(f"bind {bind_s:.2f} s, 4 trials {run_s:.1f} s")
    # the shared file goes with the trainable
    del bound, grid
    gc.collect()
    assert not os.path.exists(path)


def test_small_objects_travel_inline():
    bound = tune.with_parameters(trainable, data=np.zeros(10))
    assert bound._shared is None
    assert cloudpickle.loads(cloudpickle.dumps(bound)).params["data"].tolist() == [0.0] * 10
