"""A Ray head started as a user starts one (``ray start --head --block``), for the tests
that drive tandem against a running Ray cluster.

Two things make it dependable on a loaded machine:

* its GCS port is taken from **below the kernel's ephemeral range** and above the ports
  Ray reserves for itself: a port found free by binding port 0 lies in that range, and
  between this process closing it and Ray's GCS binding it, any outgoing connection on the
  machine (the other test process's servers, PostgreSQL, Ray's own workers) can be given
  the same port. Nothing picks ports below the range unasked, so a port checked free there
  stays free until Ray binds it;
* what ``ray start`` printed, and the GCS's own log, are kept, and a head that exits before
  its port opens fails with them instead of a bare "exited".
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence

import psutil


def ray_cli() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    return beside if os.path.exists(beside) else (shutil.which("ray") or "ray")


def _ephemeral_low() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _bindable(port: int) -> bool:
    for host in ("0.0.0.0", "127.0.0.1"):  # Ray's GCS listens on every address
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


# Ray's own fixed ports lie below it: 6379, 8265, 10001 and its workers' 10002-19999 (a
# GCS port among those is refused by ``ray start``)
_ABOVE_RAYS_OWN = 20000


def port_outside_ephemeral_range() -> int:
    """A free TCP port below the ephemeral range (see the module's docstring)."""
    low = max(_ephemeral_low(), _ABOVE_RAYS_OWN + 1000)
    for _ in range(200):
        port = random.randint(_ABOVE_RAYS_OWN, low - 1)
        if _bindable(port):
            return port
    raise RuntimeError(f"no free port found in {_ABOVE_RAYS_OWN}..{low - 1}")


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, errors="replace") as f:
            return f.read()[-n:]
    except OSError:
        return ""


def _why(log_path: str, tmp: str) -> str:
    parts = [f"--- ray start (its output)\n{_tail(log_path)}"]
    for err in sorted(glob.glob(os.path.join(tmp, "session_*", "logs", "gcs_server*.err"))):
        parts.append(f"--- {os.path.basename(err)}\n{_tail(err, 1500)}")
    return "\n".join(parts)


@contextlib.contextmanager
def ray_head(args: Sequence[str], *, env: dict[str, str] | None = None,
             port: int | None = None, prefix: str = "trh", up_within_s: float = 90.0,
             keep_tmp: bool = False) -> Iterator[str]:
    """Run ``ray start --head --block --port=<port> --temp-dir=<tmp> <args>`` and yield
    its address once its GCS port accepts connections; on leaving, stop it as Ctrl-C
    would (SIGTERM) and end whatever of its process tree is left. ``port`` defaults to
    :func:`port_outside_ephemeral_range`."""
    port = port or port_outside_ephemeral_range()
    tmp = tempfile.mkdtemp(prefix=prefix, dir="/tmp")  # Ray's socket paths must stay short
    log_path = os.path.join(tmp, "ray-start.log")
    with open(log_path, "wb") as log:
        head = subprocess.Popen(
            [ray_cli(), "start", "--head", "--block", f"--port={port}",
             f"--temp-dir={tmp}", "--disable-usage-stats", *args],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + up_within_s
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if head.poll() is not None:
                    raise AssertionError(f"ray start --head exited with {head.returncode} "
                                         f"before port {port} opened\n{_why(log_path, tmp)}") from None
                if time.monotonic() > deadline:
                    raise AssertionError(f"the Ray head did not open port {port} within "
                                         f"{up_within_s:.0f} s\n{_why(log_path, tmp)}") from None
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        tree = [head, *psutil.Process(head.pid).children(recursive=True)] \
            if head.poll() is None else []
        head.send_signal(signal.SIGTERM)  # ray start --block stops its processes
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
        if not keep_tmp:
            shutil.rmtree(tmp, ignore_errors=True)
