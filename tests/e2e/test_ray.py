"""tandem on Ray as docs/ray.md tells users: a Ray head started with ``ray start``, then a
script that calls ``tandem.init(cluster="ray", ray_address=...)``."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import psutil
import pytest

from tests.e2e.conftest import free_port, line, ray_cli

pytest.importorskip("ray")
pytestmark = [pytest.mark.timeout(240), pytest.mark.slow, pytest.mark.ray, pytest.mark.ray_cluster]


@pytest.fixture
def ray_head():
    """``ray start --head --block`` in the background (stopped with SIGTERM, as Ctrl-C)."""
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="te2e", dir="/tmp")  # Ray's socket paths must stay short
    env = dict(os.environ, RAY_AUTH_MODE="disabled")
    head = subprocess.Popen(
        [ray_cli(), "start", "--head", "--block", f"--port={port}", "--num-cpus=2",
         "--include-dashboard=false", f"--temp-dir={tmp}", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None, "ray start --head exited"
                assert time.monotonic() < deadline, "the Ray head did not come up"
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        tree = [head, *psutil.Process(head.pid).children(recursive=True)] \
            if head.poll() is None else []
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(15)
        except subprocess.TimeoutExpired:
            pass
        _, alive = psutil.wait_procs([p for p in tree if p.pid != head.pid], timeout=5)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        if head.poll() is None:
            head.kill()
            head.wait()
        shutil.rmtree(tmp, ignore_errors=True)


def test_fit_and_tune_on_a_running_ray_cluster(user, ray_head):
    out = user.python("ray_fit.py", ray_head, env=user.env(RAY_AUTH_MODE="disabled"),
                      timeout_s=180)
    assert line(out, "FIT") == "2 True True"  # workers are Ray actors, not this process
    assert line(out, "TUNE") == "0 0.2"
    assert os.path.isdir(os.path.join(user.storage, "on_ray", "logs"))
