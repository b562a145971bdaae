"""A forked worker's exit handlers (``_worker_main.forget_inherited_exit_handlers`` and
``run_exit_handlers``), on a real ``os.fork`` as the zygote makes: what the worker
registered runs at its exit, what the process it was forked from registered does not, and
a handler that hangs does not keep the worker."""

from __future__ import annotations

import atexit
import os
import sys
import tempfile
import time

import pytest

from tandem.cluster import _worker_main as wm

pytestmark = pytest.mark.timeout(60)


def _fork(child, tmp_path) -> tuple[int, str]:
    """Runs ``child()`` in a fork that exits as the zygote's forks do; returns its exit
    code and what it wrote to stderr."""
    err = tmp_path / "stderr"
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            # a worker's stderr and error printing, not pytest's capture and hook
            sys.stderr = open(err, "w")
            sys.unraisablehook = sys.__unraisablehook__
            wm.forget_inherited_exit_handlers()
            code = child()
            wm.run_exit_handlers(code)
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), err.read_text() if err.exists() else ""


def test_the_worker_runs_its_own_handlers_and_not_those_of_the_process_it_was_forked_from(
        tmp_path):
    inherited_file = tmp_path / "inherited_handler_ran"
    inherited_dir = tempfile.mkdtemp(dir=tmp_path)

    def inherited() -> None:
        inherited_file.write_text("yes")

    held = tempfile.TemporaryDirectory(dir=tmp_path)  # the parent's: must outlive the fork
    atexit.register(inherited)
    try:
        def child() -> int:
            atexit.register(lambda: (tmp_path / "own_handler_ran").write_text("yes"))
            own = tempfile.TemporaryDirectory(dir=tmp_path)  # left open, as users do
            (tmp_path / "own_dir").write_text(own.name)
            return 3

        code, err = _fork(child, tmp_path)
    finally:
        atexit.unregister(inherited)
    assert code == 3, err
    assert (tmp_path / "own_handler_ran").read_text() == "yes"
    assert not os.path.exists((tmp_path / "own_dir").read_text())  # its finalizer ran
    assert not inherited_file.exists()
    assert os.path.isdir(held.name) and os.path.isdir(inherited_dir)
    held.cleanup()


def test_a_handler_that_hangs_does_not_keep_the_worker(tmp_path, monkeypatch):
    monkeypatch.setattr(wm, "EXIT_HANDLERS_TIMEOUT_S", 0.5)

    def child() -> int:
        atexit.register(lambda: (tmp_path / "second_ran").write_text("yes"))
        atexit.register(time.sleep, 3600)  # runs first (last registered)
        return 0

    t0 = time.monotonic()
    code, err = _fork(child, tmp_path)
    assert code == 0
    assert time.monotonic() - t0 < 30
    assert "exit handlers (atexit) ran past 0.5 s; it exits without the rest" in err, err
    assert not (tmp_path / "second_ran").exists()  # what was left did not run


def test_a_handler_that_raises_is_printed_and_the_others_still_run(tmp_path):
    def child() -> int:
        atexit.register(lambda: (tmp_path / "first_registered").write_text("yes"))
        atexit.register(lambda: 1 / 0)
        return 0

    code, err = _fork(child, tmp_path)
    assert code == 0
    assert "ZeroDivisionError" in err
    assert (tmp_path / "first_registered").read_text() == "yes"
