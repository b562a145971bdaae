"""The test process's worker processes (children of its zygotes), for tests that check
none is left. Its own module, not ``tests/conftest.py``: a worker that unpickles a function
of a test module imports that module, and importing the conftest there would change the
worker's environment (its session HOME, the ``TANDEM_*`` variables it removes)."""

from __future__ import annotations

import time

import psutil


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _warm(p: psutil.Process) -> bool:
    try:
        return p.name() == "tandem-warm"
    except psutil.Error:
        return False


def worker_processes() -> list[psutil.Process]:
    """Live worker processes (children of the zygote) of this test process; warm workers
    waiting for a job (named ``tandem-warm``, see tandem.cluster._pool) are not counted."""
    out = []
    for p in psutil.Process().children(recursive=False):
        try:
            if "tandem.cluster._zygote" in " ".join(p.cmdline()):
                out.extend(c for c in p.children(recursive=True) if _alive(c) and not _warm(c))
        except psutil.Error:
            pass
    return out


def no_workers_left(timeout_s: float = 30.0) -> list[psutil.Process]:
    """``worker_processes()`` once it is empty, or what it still holds after ``timeout_s``.

    A killed worker ends a moment later (longer on a loaded machine), and each look is a
    fresh scan: a warm worker the zygote forks meanwhile is seen under the zygote's name
    for an instant before it names itself ``tandem-warm``, and is not a leftover."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = worker_processes()
        if not left or time.monotonic() >= deadline:
            return left
        psutil.wait_procs(left, timeout=min(1.0, max(0.0, deadline - time.monotonic())))
