"""examples/ray_cluster.py runs as written against a Ray cluster (an example is a test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.timeout(300), pytest.mark.ray_cluster]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_ray_cluster_example(ray_cluster, tmp_path):
    out = subprocess.run(
        [sys.executable, os.path.join(ROOT, "examples", "ray_cluster.py"),
         "--address", ray_cluster.cluster.address, "--storage", str(tmp_path),
         "--epochs", "8"],
        cwd=str(tmp_path), capture_output=True, text=True, timeout=280,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    trained = float(re.search(r"trained on Ray: accuracy ([0-9.]+)", out.stdout).group(1))
    tuned = float(re.search(r"tuned on Ray: best lr [0-9.]+, accuracy ([0-9.]+)",
                            out.stdout).group(1))
    assert trained > 0.8 and tuned > 0.8
