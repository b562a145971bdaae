"""Issue 21, item 3: ``tune.ResumeConfig`` for ``Tuner.restore(..., _resume_config=...)``:
per trial state, RESUME / RESTART / SKIP, as Ray's controller requeues restored trials."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import tune
from tandem.train import RunConfig

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def trainable(config):
    marker = os.path.join(config["dir"], "fixed")
    if config["x"] == 2 and not os.path.exists(marker):
        raise RuntimeError("not yet")
    with open(os.path.join(config["dir"], f"runs_{config['x']}"), "a") as f:
        f.write(".")
    for i in range(2):
        tune.report({"score": config["x"] * 10 + i})


def _runs(d, x):
    p = d / f"runs_{x}"
    return len(p.read_text()) if p.exists() else 0


def test_resume_config_per_trial_state(storage, tmp_path):
    tandem.init(num_cpus=2)
    space = {"x": tune.grid_search([1, 2, 3]), "dir": str(tmp_path)}
    rc = RunConfig(storage_path=storage, name="resume_cfg", verbose=0)
    grid = tune.Tuner(trainable, param_space=space, run_config=rc).fit()
    assert grid.num_errors == 1 and [_runs(tmp_path, x) for x in (1, 2, 3)] == [1, 0, 1]
    (tmp_path / "fixed").touch()
    path = os.path.join(storage, "resume_cfg")

    # finished x=1..3: x=1,3 restarted from scratch; errored x=2 resumed (now succeeds)
    R = tune.ResumeConfig.ResumeType
    grid = tune.Tuner.restore(path, trainable, _resume_config=tune.ResumeConfig(
        finished=R.RESTART, errored="resume")).fit()
    assert grid.num_errors == 0
    assert [_runs(tmp_path, x) for x in (1, 2, 3)] == [2, 1, 2]
    assert sorted(r.metrics["score"] for r in grid) == [11, 21, 31]

    # the default (Ray's): finished trials are skipped, nothing runs again
    grid = tune.Tuner.restore(path, trainable, resume_config=tune.ResumeConfig()).fit()
    assert [_runs(tmp_path, x) for x in (1, 2, 3)] == [2, 1, 2]
    assert sorted(r.metrics["score"] for r in grid) == [11, 21, 31]


def test_bad_resume_type_is_refused():
    with pytest.raises(Exception, match=r"ResumeConfig\(errored='again'\) is invalid"):
        tune.ResumeConfig(errored="again")
