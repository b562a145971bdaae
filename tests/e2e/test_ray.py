"""tandem on Ray as docs/ray.md tells users: a Ray head started with ``ray start``, then a
script that calls ``tandem.init(cluster="ray", ray_address=...)``."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import line
from tests.ray_head import ray_head as start_ray_head

pytest.importorskip("ray")
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow, pytest.mark.ray, pytest.mark.ray_cluster]


@pytest.fixture
def ray_head():
    """``ray start --head --block`` in the background (stopped with SIGTERM, as Ctrl-C)."""
    with start_ray_head(["--num-cpus=2", "--include-dashboard=false"], prefix="te2e",
                        env=dict(os.environ, RAY_AUTH_MODE="disabled")) as address:
        yield address


def test_fit_and_tune_on_a_running_ray_cluster(user, ray_head):
    out = user.python("ray_fit.py", ray_head, env=user.env(RAY_AUTH_MODE="disabled"),
                      timeout_s=180)
    assert line(out, "FIT") == "2 True True"  # workers are Ray actors, not this process
    assert line(out, "TUNE") == "0 0.2"
    assert os.path.isdir(os.path.join(user.storage, "on_ray", "logs"))
