"""Training entry points as a user runs them: blocking and non-blocking ``fit``."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.conftest import line

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
def test_readme_torch_fit_blocks_and_checkpoints(user):
    out = user.python("fit_blocking.py")
    assert line(out, "RESULT").startswith("step=4 loss=")
    # each rank's output reaches the console with its rank prefix
    assert "(rank=0) worker 0 of 2 done" in out and "(rank=1) worker 1 of 2 done" in out
    run = line(out, "RUN")
    assert run == os.path.join(user.storage, "readme_fit")  # the default storage path
    ckpt = line(out, "CHECKPOINT")
    assert os.path.dirname(ckpt) == run and os.path.isfile(os.path.join(ckpt, "model.pt"))
    with open(os.path.join(run, "result.json")) as f:
        rows = [json.loads(r) for r in f]
    assert [r["step"] for r in rows] == [0, 1, 2, 3, 4] and line(out, "ROWS") == "5"
    assert os.path.isfile(os.path.join(run, "progress.csv"))
    assert os.path.isfile(os.path.join(run, "logs", "rank_1.log"))


def test_fit_without_blocking_streams_results_and_stops(user):
    out = user.python("fit_nonblocking.py", user.home)
    assert line(out, "JOB").split()[1] in ("PENDING", "RUNNING")
    assert line(out, "STATUS_WHILE_RUNNING") == "RUNNING"
    assert line(out, "STEPS") == "[0, 1, 2, 3]"
    assert line(out, "FINAL") == "FINISHED 3"
    assert line(out, "LOGS_HAVE_RANK1") == "True"
    assert line(out, "STOPPED_STATUS") == "STOPPED"
    assert os.path.isdir(os.path.join(user.storage, "nonblocking"))


@pytest.mark.slow
def test_program_using_rays_v2_module_paths(user):
    """docs/migration.md: code importing from Ray's documented module paths
    (``ray.train.v2.api.*``, ``ray.tune.logger``, ...) runs with ``ray`` swapped for
    ``tandem``."""
    out = user.python("ray_v2_paths.py")
    assert line(out, "STEPS") == "[0, 1, 2] WORLD 2"
    assert line(out, "KEPT") == "['checkpoint_000003']"
    assert line(out, "FAILED") == "WorkerGroupError True"  # Ray V2 raises WorkerGroupError (a TrainingFailedError)
    assert line(out, "BEST") == "3 2"
    assert line(out, "TB_EVENTS") == "3"
