"""The zygote: a small single-threaded process that forks worker processes on request.

Forking from a warm process makes a worker start in milliseconds instead of paying for a
fresh interpreter and ``import torch`` each time; the pages the zygote imported are shared
by every worker, which keeps the memory of a worker gang small. The zygote imports heavy
modules only when a job asks for them (``preload``), so trivial jobs never pay for torch.

Protocol (frames from ``_wire``), driver -> zygote on stdin:
    ("preload", [module, ...])
    ("learn", [module, ...])     what a job's workers imported: import them, skip failures
    ("fork", token, spec)        spec: dict(worker_id, address, authkey, log_path, env, cwd,
                                 sys_path, argv), or dict(warm_id, address, authkey) for a
                                 warm worker that takes on a job later (see _pool.py)
zygote -> driver on stdout:
    ("preloaded", [module, ...], error_or_None)
    ("learned", count, None_or_why_learning_must_stop)   count: names done with since the last
    ("forked", token, pid)
    ("exit", pid, returncode)    returncode < 0 is the signal that killed it

When stdin closes (the driver exited or died) the zygote kills every worker it forked and
exits, so no worker outlives its driver.
"""

from __future__ import annotations

import collections
import errno
import gc
import importlib
import os
import select
import signal
import sys
from typing import Any

from tandem.cluster import _wire

_PRCTL: Any = None


def _load_prctl() -> None:
    """Loads libc's prctl once in the zygote, so forked workers don't pay for ctypes."""
    global _PRCTL
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            _PRCTL = ctypes.CDLL("libc.so.6", use_errno=True).prctl
        except OSError:
            _PRCTL = None


WARM_NAME = b"tandem-warm"
"""The process name (``ps``, ``psutil.Process.name()``) of a warm worker waiting for a job."""
_NAME: bytes = b""


def _set_process_name(name: bytes) -> None:
    if _PRCTL is not None and name:
        PR_SET_NAME = 15
        _PRCTL(PR_SET_NAME, name[:15])


def _set_parent_death_signal() -> None:
    """Ask Linux to SIGKILL this process when its parent dies (no-op elsewhere)."""
    if _PRCTL is not None:
        PR_SET_PDEATHSIG = 1
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


#: Native threads a fork may leave behind, by the name the library gives them: jemalloc's
#: background purger (pyarrow's allocator, which pandas and scikit-learn >= 1.9 load at
#: import), which its own fork handlers start again in the child when it is needed.
FORK_SAFE_THREAD_NAMES = ("jemalloc_bg_thd",)
#: Libraries whose unnamed threads, started as they load, are fork-safe: OpenBLAS (numpy's,
#: scipy's) parks its pool before a fork and starts it again in the child
#: (``pthread_atfork``), as every forked numpy process relies on; one thread fewer than the
#: cores it uses.
FORK_SAFE_THREAD_LIBS = ("openblas",)


class ThreadCheck:
    """What an import started that a fork would not carry (``started()``), taken around one
    import: any Python thread, and native threads but those of the fork-safe libraries
    above. A learned import that starts one ends the learning (a worker forked after it could
    wait forever on a lock the missing thread held); torch's and numpy's imports start
    none, TensorFlow's does."""

    def __init__(self) -> None:
        self._python = _python_threads()
        self._tids = _thread_names()
        self._libs = _mapped_libraries() if self._tids is not None else frozenset()

    def started(self) -> str | None:
        """None when the import started nothing a fork would lose, else what it started."""
        if _python_threads() > self._python:
            return "a Python thread"
        if self._tids is None:  # no /proc: native threads cannot be told apart
            return None
        now = _thread_names() or {}
        new = [name for tid, name in now.items() if tid not in self._tids]
        others = [n for n in new if not n.startswith(FORK_SAFE_THREAD_NAMES)]
        if not others:
            return None
        loaded = [lib for lib in _mapped_libraries() - self._libs
                  if any(k in os.path.basename(lib).lower() for k in FORK_SAFE_THREAD_LIBS)]
        if loaded and len(others) <= len(loaded) * (os.cpu_count() or 1):
            return None  # OpenBLAS's pool: at most one thread per core per library loaded
        return f"{len(others)} native thread(s) ({', '.join(sorted(set(others)))})"


def _python_threads() -> int:
    return len(sys._current_frames())


def _thread_names() -> dict[str, str] | None:
    """Thread id -> name (``comm``), or None without /proc."""
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return None
    names: dict[str, str] = {}
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names[tid] = f.read().strip()
        except OSError:  # ended meanwhile
            pass
    return names


def _mapped_libraries() -> frozenset[str]:
    """The shared libraries mapped into this process (~0.5 ms with torch loaded)."""
    try:
        with open("/proc/self/maps", "rb") as f:
            lines = f.read().splitlines()
    except OSError:
        return frozenset()
    return frozenset(line.rsplit(None, 1)[-1].decode(errors="replace") for line in lines
                     if b".so" in line and line.count(b" ") >= 5)


class _Zygote:
    def __init__(self, inp: int, out: int) -> None:
        self._in = inp
        self._out = out
        self._reader = _wire.FrameReader()
        self._children: set[int] = set()
        self._learning: collections.deque[str] = collections.deque()  # still to import
        self._learned = 0
        self._stop_learning: str | None = None
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_w, False)
        os.set_blocking(self._wake_r, False)

    def _send(self, obj: object) -> None:
        data = _wire.encode(obj)
        view = memoryview(data)
        while view:
            n = os.write(self._out, view)
            view = view[n:]

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.set_wakeup_fd(self._wake_w)
        try:
            while True:
                try:
                    ready, _, _ = select.select([self._in, self._wake_r], [], [],
                                                0 if self._learning else None)
                except InterruptedError:
                    ready = []
                if self._wake_r in ready:
                    drain(self._wake_r)
                self._reap()
                if self._in in ready:
                    data = os.read(self._in, 1 << 16)
                    if not data:
                        return
                    for msg in self._reader.feed(data):
                        self._handle(msg)
                if self._learning and not ready:
                    self._learn_one()
        finally:
            self._kill_all()

    def _handle(self, msg: tuple) -> None:
        kind = msg[0]
        if kind == "preload":
            error = None
            for name in msg[1]:
                try:
                    importlib.import_module(name)
                except BaseException as e:  # noqa: BLE001 - report, never die: the driver decides
                    error = f"{type(e).__name__}: {e}"
            gc.freeze()  # children then leave the imported objects' pages shared
            self._send(("preloaded", msg[1], error))
        elif kind == "learn":
            self._learning.extend(msg[1])
        elif kind == "fork":
            _, token, spec = msg
            pid = os.fork()
            if pid == 0:
                self._become_worker(spec)  # never returns
            self._children.add(pid)
            self._send(("forked", token, pid))
        elif kind == "kill":
            for pid in msg[1]:
                _killpg(pid)

    def _learn_one(self) -> None:
        """Imports the next module a job's workers imported (``ImportLearner``), in their
        order, a failure skipped; one per turn of the loop, so forks and exits asked for
        meanwhile are not held up by a long list. Once the list is done (or an import
        started a thread a fork would not carry, ``ThreadCheck``: then the rest is dropped),
        tells the driver ``("learned", count, why_to_stop_or_None)``."""
        name = self._learning.popleft()
        self._learned += 1  # names done with, imported or not
        if name not in sys.modules:
            check = ThreadCheck()
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001, S110 - a module that cannot load here is skipped
                pass
            started = check.started()
            if started is not None:
                self._stop_learning = f"importing {name!r} started {started}"
                self._learned += len(self._learning)
                self._learning.clear()
        if not self._learning:
            gc.freeze()  # children then leave the imported objects' pages shared
            self._send(("learned", self._learned, self._stop_learning))
            self._learned = 0

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._children.discard(pid)
            self._send(("exit", pid, os.waitstatus_to_exitcode(status)))

    def _kill_all(self) -> None:
        for pid in list(self._children):
            _killpg(pid)
        for pid in list(self._children):
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass

    def _become_worker(self, spec: dict) -> None:
        code = 1
        exit_handlers = None
        warm = "warm_id" in spec
        if warm:  # first thing: the moment a scan sees it under the zygote's name is short
            _set_process_name(WARM_NAME)
        try:
            os.setsid()  # own process group: killpg reaches the user's subprocesses too
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            _set_parent_death_signal()
            for fd in (self._in, self._out, self._wake_r, self._wake_w):
                try:
                    os.close(fd)
                except OSError:
                    pass
            devnull = os.open(os.devnull, os.O_RDONLY)
            os.dup2(devnull, 0)
            os.close(devnull)
            from tandem.cluster import _worker_main

            _worker_main.forget_inherited_exit_handlers()
            # numpy's and torch's global generators were seeded once, when the zygote
            # imported them: every fork would draw the same numbers (Python's ``random`` is
            # reseeded by its own fork hook). Seeded from the OS, as a fresh process's are.
            _worker_main._reseed()
            exit_handlers = _worker_main.run_exit_handlers
            names = _worker_main.ProcessNames(
                lambda idle: _set_process_name(WARM_NAME if idle else _NAME))
            if warm:  # forked ahead of demand: takes on a job when assigned
                code = _worker_main.run_warm(spec, names)
            else:
                _worker_main.enter_job(spec)
                code = _worker_main.run(spec, names)
        except BaseException:  # noqa: BLE001 - printed to the worker's log, then exit 1
            import traceback

            traceback.print_exc()
        finally:
            try:
                if exit_handlers is not None:  # the worker's own: see _worker_main
                    exit_handlers(code)
                sys.stdout.flush()
                sys.stderr.flush()
            except BaseException:  # noqa: BLE001, S110 - exiting anyway
                pass
            os._exit(code)


def drain(fd: int) -> None:
    """Reads a non-blocking wake-up pipe empty (``signal.set_wakeup_fd``'s bytes)."""
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass


def _killpg(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError as e:
        if e.errno != errno.ESRCH:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def main() -> None:
    # No parent-death signal here: Linux sends it when the parent *thread* ends, and the
    # driver may start the zygote from a short-lived job thread. Stdin EOF covers the
    # driver's death (its end of the pipe closes with it).
    inp = os.dup(0)
    out = os.dup(1)
    # Anything that prints to stdout (an imported module) must not corrupt the frame stream.
    os.dup2(2, 1)
    # What every worker runs: imported once here, inherited by every fork.
    importlib.import_module("tandem.cluster._worker_main").mark_worker_process()
    import traceback  # noqa: F401 - workers print tracebacks; import it once here

    _load_prctl()
    global _NAME
    try:
        with open("/proc/self/comm", "rb") as f:
            _NAME = f.read().strip()
    except OSError:
        _NAME = b""
    gc.freeze()  # children then leave the imported objects' pages shared
    try:
        _Zygote(inp, out).serve()
    except BrokenPipeError:
        pass  # the cluster closed its end (it shut down): nobody is left to tell
    # Its workers are dead and reaped: leave without finalizing the interpreter, which with
    # torch imported takes a few hundred ms that the driver's shutdown would wait for.
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)


if __name__ == "__main__":
    main()
