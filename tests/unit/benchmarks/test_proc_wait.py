"""The harness's wait for a measured process (``benchmarks._proc.wait_exit``): its exit
code, and a process still running past the timeout is reported as one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchmarks._proc import wait_exit

pytestmark = pytest.mark.timeout(60)


def test_wait_exit_returns_the_exit_code_and_reaps_the_process():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait_exit(proc, 30) == 3
    assert proc.returncode == 3  # reaped: no zombie left


def test_wait_exit_raises_for_a_process_still_running():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            wait_exit(proc, 0.2)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()
