"""Run one measurement in a fresh subprocess and watch its process tree.

The parent times the subprocess from ``Popen`` to exit (``process_s``), optionally
samples the proportional set size (PSS) of the whole tree (``peak_pss_mb``: the
subprocess, its workers, and for Ray the GCS/raylet/dashboard processes it starts), and
after exit ends any descendant it saw that is still alive (a Ray raylet that outlived its
driver would otherwise distort the next measurement).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parent.parent


class MeasurementError(RuntimeError):
    """A measurement subprocess failed, timed out, or wrote no figures."""


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a measurement subprocess: ours, plus the repository root and
    ``src`` on ``PYTHONPATH`` (so ``benchmarks`` and an uninstalled ``tandem`` import in
    the subprocess and in any worker process it starts)."""
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "src")]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.setdefault("PYTHONUNBUFFERED", "1")
    # measure what a user's Python does: it caches bytecode. A machine that sets
    # PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile every module of every
    # system from source in every measurement (~0.5 s of tandem's cold start)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(extra or {})
    return env


class _TreeWatcher(threading.Thread):
    """Polls the process tree under ``pid``: remembers every descendant, and sums PSS."""

    def __init__(self, pid: int, *, sample_memory: bool, interval_s: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.sample_memory = sample_memory
        self.interval_s = interval_s
        self.seen: dict[int, float] = {}  # pid -> create_time
        self.peak_pss = 0
        self.samples = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.poll()
            self._halt.wait(self.interval_s)

    def poll(self) -> None:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            return
        total = 0
        for p in procs:
            try:
                self.seen.setdefault(p.pid, p.create_time())
                if self.sample_memory:
                    total += p.memory_full_info().pss
            except psutil.Error:
                continue
        if self.sample_memory and total:
            self.samples += 1
            self.peak_pss = max(self.peak_pss, total)

    def stop(self) -> None:
        self._halt.set()
        self.join(timeout=5)

    def leftovers(self) -> list[psutil.Process]:
        alive = []
        for pid, created in self.seen.items():
            if pid == self.root.pid:
                continue
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    alive.append(p)
            except psutil.Error:
                continue
        return alive


def _end_leftovers(watcher: _TreeWatcher, grace_s: float) -> int:
    """Give processes the subprocess started ``grace_s`` to exit, then SIGKILL them."""
    deadline = time.monotonic() + grace_s
    left = watcher.leftovers()
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = watcher.leftovers()
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    return len(left)


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def wait_exit(proc: subprocess.Popen, timeout_s: float) -> int:
    """``proc.wait(timeout_s)``, but seen the moment the process exits: ``Popen.wait`` with
    a timeout polls, sleeping up to 50 ms between looks, which put up to 50 ms on every
    ``process_s`` (a 0.37 s cold start read as 0.37 or 0.42 s). Linux's ``pidfd_open``
    where there is one."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # not Linux 5.3+, or reaped already
        return proc.wait(timeout=timeout_s)
    try:
        select.select([fd], [], [], timeout_s)
    finally:
        os.close(fd)
    return proc.wait(timeout=0)  # reaps it; TimeoutExpired if it still runs


def run_child(
    target: str | None,
    params: dict[str, Any],
    *,
    workdir: Path,
    log_path: Path,
    timeout_s: float,
    env: dict[str, str] | None = None,
    cmd: list[str] | None = None,
    sample_memory: bool = False,
) -> dict[str, Any]:
    """Run one measurement subprocess and return its figures.

    Args:
        target: ``"module:function"`` run through ``benchmarks._child``; or None with ``cmd``.
        params: JSON-able parameters passed to the function.
        workdir: fresh directory (``$BENCH_WORKDIR``).
        log_path: where the subprocess's stdout and stderr go (appended).
        timeout_s: the subprocess's process group is killed after this.
        env: extra environment variables.
        cmd: a full command instead of ``target`` (e.g. ``torchrun``); it must write its
            figures as JSON to ``$BENCH_RESULT_FILE``.
        sample_memory: sample PSS of the process tree every 0.25 s.

    Returns:
        The figures, plus ``process_s`` and (with ``sample_memory``) ``peak_pss_mb``.

    Raises:
        MeasurementError: non-zero exit, timeout, or no figures written.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    result_file = workdir / f"_figures_{time.monotonic_ns()}.json"
    full_env = child_env(
        {**(env or {}), "BENCH_WORKDIR": str(workdir), "BENCH_RESULT_FILE": str(result_file)}
    )
    if cmd is None:
        if target is None:
            raise ValueError("run_child needs a target or a cmd")
        cmd = [sys.executable, "-m", "benchmarks._child", target, json.dumps(params)]
    with open(log_path, "a") as log:
        log.write(f"$ {' '.join(cmd)}\n")
        log.flush()
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=str(ROOT),
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        watcher = _TreeWatcher(proc.pid, sample_memory=sample_memory)
        watcher.start()
        timed_out = False
        try:
            rc = wait_exit(proc, timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            rc = proc.wait()
        process_s = time.perf_counter() - t0
        watcher.stop()
        killed = _end_leftovers(watcher, grace_s=0.0 if timed_out else 5.0)
        if killed:
            log.write(f"[bench] ended {killed} leftover process(es) of this measurement\n")
    if timed_out:
        raise MeasurementError(f"timed out after {timeout_s:.0f} s\n{_tail(log_path)}")
    if rc != 0:
        raise MeasurementError(f"exit code {rc}\n{_tail(log_path)}")
    if not result_file.exists():
        raise MeasurementError(f"no figures written\n{_tail(log_path)}")
    figures = json.loads(result_file.read_text())
    result_file.unlink()
    figures["process_s"] = process_s
    if sample_memory:
        figures["peak_pss_mb"] = watcher.peak_pss / 2**20 if watcher.samples else None
    return figures
