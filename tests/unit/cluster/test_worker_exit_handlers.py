"""A forked worker's exit handlers (``_worker_main.forget_inherited_exit_handlers`` and
``run_exit_handlers``), on a real ``os.fork`` as the zygote makes: what the worker
registered runs at its exit, what the process it was forked from registered does not, and
a handler that hangs does not keep the worker.

The fork is made in a fresh Python process, as the zygote is one, not in the test process:
a process connected to Ray (which other tests in this process may have been) cannot be
forked safely."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time

import pytest

pytestmark = pytest.mark.timeout(60)

_FORKER = textwrap.dedent('''
    import atexit, os, sys, tempfile, time
    from tandem.cluster import _worker_main as wm

    case, tmp = sys.argv[1], sys.argv[2]

    def note(name, text="yes"):
        with open(os.path.join(tmp, name), "w") as f:
            f.write(text)

    # the zygote's own: a handler, and a temporary folder (a finalizer run at exit)
    atexit.register(note, "inherited_handler_ran")
    held = tempfile.TemporaryDirectory(dir=tmp)
    note("held_dir", held.name)

    def child():
        if case == "own":
            atexit.register(note, "own_handler_ran")
            own = tempfile.TemporaryDirectory(dir=tmp)  # left open, as users do
            note("own_dir", own.name)
            return 3
        if case == "hangs":
            wm.EXIT_HANDLERS_TIMEOUT_S = 0.5
            atexit.register(note, "second_ran")
            atexit.register(time.sleep, 3600)  # runs first (last registered)
            return 0
        if case == "raises":
            atexit.register(note, "first_registered")
            atexit.register(lambda: 1 / 0)
            return 0

    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            sys.stderr = open(os.path.join(tmp, "stderr"), "w")
            wm.forget_inherited_exit_handlers()
            code = child()
            wm.run_exit_handlers(code)
        finally:
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    print("CHILD", os.waitstatus_to_exitcode(status))
    print("HELD", os.path.isdir(held.name))  # the parent's folder outlived the fork
    atexit.unregister(note)  # this process's own exit is not under test
    held.cleanup()
''')


def _fork(case: str, tmp_path) -> tuple[int, str]:
    """Forks a worker in a fresh process for ``case``; its exit code and its stderr (the
    parent's own temporary folder must still be there after the worker's exit)."""
    out = subprocess.run([sys.executable, "-c", _FORKER, case, str(tmp_path)],
                         capture_output=True, text=True, timeout=50)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("CHILD ")), None)
    assert line, out.stdout + out.stderr
    assert "HELD True" in out.stdout, out.stdout + out.stderr
    err = tmp_path / "stderr"
    return int(line.split()[1]), err.read_text() if err.exists() else ""


def test_the_worker_runs_its_own_handlers_and_not_those_of_the_process_it_was_forked_from(
        tmp_path):
    code, err = _fork("own", tmp_path)
    assert code == 3, err
    assert (tmp_path / "own_handler_ran").read_text() == "yes"
    assert not os.path.exists((tmp_path / "own_dir").read_text())  # its finalizer ran
    assert not (tmp_path / "inherited_handler_ran").exists()


def test_a_handler_that_hangs_does_not_keep_the_worker(tmp_path):
    t0 = time.monotonic()
    code, err = _fork("hangs", tmp_path)
    assert code == 0
    assert time.monotonic() - t0 < 30
    assert "exit handlers (atexit) ran past 0.5 s; it exits without the rest" in err, err
    assert not (tmp_path / "second_ran").exists()  # what was left did not run


def test_a_handler_that_raises_is_printed_and_the_others_still_run(tmp_path):
    code, err = _fork("raises", tmp_path)
    assert code == 0
    assert "ZeroDivisionError" in err
    assert (tmp_path / "first_registered").read_text() == "yes"


def test_which_handlers_count_as_the_user_s(monkeypatch, tmp_path):
    """A handler of the driver's script counts though the worker's ``__main__`` is the
    zygote's module, installed where tandem is; an installed package's and tandem's do
    not."""
    from tandem.cluster import _worker_main as wm

    installed = wm._installed_roots()[0]
    monkeypatch.setattr(sys.modules["__main__"], "__file__",
                        os.path.join(installed, "tandem", "cluster", "_zygote.py"),
                        raising=False)
    assert wm._users_code("__main__")
    assert wm._users_code(None)
    assert not wm._users_code("tandem.cluster._worker_main")
    assert not wm._users_code("json")  # the standard library
    assert not wm._users_code("psutil")  # an installed package
    user = tmp_path / "tb_users_mod.py"
    user.write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    __import__("tb_users_mod")
    try:
        assert wm._users_code("tb_users_mod")
    finally:
        sys.modules.pop("tb_users_mod", None)
