"""What a worker process runs after the zygote forks it: connect, receive a task, run it.

The worker authenticates its connection first (an HMAC challenge in both directions with
the session's key, which arrived in ``spec`` through the zygote's stdin pipe); only then
are frames exchanged. The cluster layer knows nothing of training. A task is a cloudpickled callable
``task(channel) -> int`` from a higher layer; ``channel`` sends frames to the driver
(``channel.send``) and delivers the driver's frames to a handler the task registers
(``channel.on_message``). If the driver goes away, the worker exits at once.
"""

from __future__ import annotations

import atexit
import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

import cloudpickle

from tandem.cluster._wire import SocketChannel, authenticate_client


class WorkerChannel:
    """The worker's end of its connection to the driver."""

    def __init__(self, channel: SocketChannel, worker_id: str) -> None:
        self.objects: dict = {}  # WorkerSpec.objects, on clusters that pass them (Ray)
        self._channel = channel
        self.worker_id = worker_id
        self._handler: Callable[[Any], None] | None = None
        self.closing = False  # set by a host that ends the connection on purpose
        self.idle: Any = None  # a reused worker's queue for frames while no task runs
        self.learner: ImportLearner | None = None

    def send(self, obj: object) -> None:
        learner = self.learner
        if learner is not None and len(sys.modules) != learner.known:
            learner.send_new()  # what the task imported so far goes ahead of its frame
        self._channel.send(obj)

    def on_message(self, handler: Callable[[object], None]) -> None:
        """Registers the function that receives the driver's frames (on a reader thread)."""
        self._handler = handler

    def _read_forever(self) -> None:
        try:
            while True:
                msg = self._channel.recv()
                handler = self._handler
                if handler is not None:
                    handler(msg)
                elif self.idle is not None and msg[0] in ("assign", "retire"):
                    self.idle.put(msg)
        except (EOFError, OSError):
            pass
        if not self.closing:
            # The driver is gone (or closed us): nothing may outlive it.
            os._exit(1)


#: Seconds a worker's exit handlers may run (``atexit``, and ``weakref.finalize`` objects
#: such as a ``tempfile.TemporaryDirectory`` left open) before the worker exits without the
#: rest. A run that ended well waits a few seconds for its workers to end on their own (see
#: the train controller's ``_kill_gang``) and kills what is left.
EXIT_HANDLERS_TIMEOUT_S = 10.0


def forget_inherited_exit_handlers() -> None:
    """Called in a worker just forked from the zygote: the exit handlers registered in the
    zygote clean up the zygote's own state and do not run in its forks (as in a process
    ``multiprocessing`` forks); those registered in the worker do, when it exits (as in a
    fresh Python process, and a Ray worker). Logging's flush and ``weakref.finalize``'s
    exit function are registered again, for the worker's own handlers and finalizers."""
    import weakref

    atexit._clear()
    for info in list(weakref.finalize._registry.values()):  # type: ignore[attr-defined]
        info.atexit = False  # the zygote's finalizers (its temporary folders, say)
    logging = sys.modules.get("logging")
    if logging is not None:
        atexit.register(logging.shutdown)
    atexit.register(weakref.finalize._exitfunc)  # type: ignore[attr-defined]
    weakref.finalize._registered_with_atexit = True  # type: ignore[attr-defined]
    atexit.register = _register_counted


_atexit_register = atexit.register
_USER_EXIT_HANDLERS = 0


_P = ParamSpec("_P")
_T = TypeVar("_T")


def _register_counted(func: Callable[_P, _T], /, *args: _P.args,
                      **kwargs: _P.kwargs) -> Callable[_P, _T]:
    """``atexit.register`` in a worker: the same, and counts the handlers of the user's
    code (see ``_left_running``); an installed package's (registered as it is imported)
    is no reason for a fresh process."""
    global _USER_EXIT_HANDLERS
    target = getattr(func, "func", func)  # a functools.partial's function
    if _users_code(getattr(target, "__module__", None)):
        _USER_EXIT_HANDLERS += 1
    return _atexit_register(func, *args, **kwargs)


def _users_code(name: object) -> bool:
    """Whether a function of module ``name`` is the user's: ``__main__`` always (a
    function of the driver's script, pickled by value, names the driver's ``__main__``,
    which in a worker is the zygote's module, installed where tandem is); not tandem's, an
    installed package's or the standard library's; a module with no file (a built-in
    function, say ``os.remove``) counts as the user's."""
    if not isinstance(name, str) or name == "__main__":
        return True
    if name == "tandem" or name.startswith("tandem."):
        return False
    file = getattr(sys.modules.get(name), "__file__", None)
    return file is None or not file.startswith(_installed_roots())


def user_exit_handlers() -> int:
    """How many exit handlers the user's code registered in this worker so far."""
    return _USER_EXIT_HANDLERS


def run_exit_handlers(code: int) -> None:
    """Runs what the worker registered to run at its exit (see
    ``forget_inherited_exit_handlers``), bounded by ``EXIT_HANDLERS_TIMEOUT_S``: a handler
    that hangs does not keep the process (the worker exits with ``code`` without the rest).
    Non-daemon threads are not joined first, unlike a Python process's own exit: a thread a
    train function left running would keep the worker forever."""
    timer = threading.Timer(EXIT_HANDLERS_TIMEOUT_S, _exit_handlers_ran_long, (code,))
    timer.daemon = True
    timer.start()
    atexit._run_exitfuncs()
    timer.cancel()


def _exit_handlers_ran_long(code: int) -> None:
    try:
        sys.stderr.write(f"tandem: this worker's exit handlers (atexit) ran past "
                         f"{EXIT_HANDLERS_TIMEOUT_S:g} s; it exits without the rest\n")
        sys.stderr.flush()
    finally:
        os._exit(code)


#: True in a process that runs tandem's workers (the zygote and its forks, a Ray worker
#: running a tandem task): set by their entry points, never by importing this module, which
#: a driver (or a test process) may also do.
IN_WORKER_PROCESS = False


def mark_worker_process() -> None:
    """Called by each worker process's entry point (see ``IN_WORKER_PROCESS``)."""
    global IN_WORKER_PROCESS
    IN_WORKER_PROCESS = True


def enter_job(job: dict) -> None:
    """Takes on a job's worker identity: output into its log file, its environment, working
    directory, ``sys.path`` and ``sys.argv`` (the driver's, so the train function sees them)."""
    log = os.open(job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.update(job.get("env") or {})
    if job.get("cwd"):
        os.chdir(job["cwd"])
    if job.get("sys_path"):
        sys.path[:] = job["sys_path"]
    if job.get("argv") is not None:
        sys.argv[:] = job["argv"]


def _connect(spec: dict) -> SocketChannel:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(spec["address"])
    # Prove we hold the session's key and check the driver does, before any pickle. The
    # key is dropped from the spec: user code that prints its environment never sees it.
    authenticate_client(sock, spec.pop("authkey"))
    return SocketChannel(sock)


def run(spec: dict, names: ProcessNames | None = None) -> int:
    """A worker forked for one job (``enter_job`` was applied by the zygote)."""
    channel = _connect(spec)
    channel.send(("hello", spec["worker_id"], os.getpid()))
    msg = channel.recv()
    if msg[0] != "run":
        return 1
    if spec.get("reuse"):
        return _run_reused(channel, ("assign", spec, msg[1]), names)
    return _run_task(channel, spec["worker_id"], msg[1])


class ProcessNames:
    """How the zygote names a worker process (``ps``, ``psutil``): idle in the pool (a
    warm worker) or running a job."""

    def __init__(self, name: Callable[[bool], None]) -> None:
        self._name = name

    def idle(self) -> None:
        self._name(True)

    def busy(self) -> None:
        self._name(False)


def run_warm(spec: dict, names: ProcessNames | None = None) -> int:
    """A warm worker (``tandem.cluster._pool``): connects and authenticates ahead of demand,
    then waits for ``("assign", job, task)`` — or ``("retire",)`` when the pool shrinks."""
    try:
        channel = _connect(spec)
    except (OSError, EOFError):
        return 0  # forked as the driver exited (socket gone, or closed mid-handshake)
    channel.send(("hello", spec["warm_id"], os.getpid()))
    try:
        msg = channel.recv()
    except (EOFError, OSError):
        return 0  # the driver went away while we waited: nothing to do, nothing to say
    if msg[0] != "assign":
        return 0
    job = msg[1]
    if names is not None:
        names.busy()
    if job.get("reuse"):
        return _run_reused(channel, msg, names)
    enter_job(job)
    return _run_task(channel, job["worker_id"], msg[2])


#: A reused worker whose resident memory grew past this (MiB; ``TANDEM_REUSE_MAX_RSS_MB``)
#: exits after its task instead of taking the next one.
REUSE_MAX_RSS_MB = 2048.0


def _run_reused(channel: SocketChannel, msg: Any, names: ProcessNames | None = None) -> int:
    """A worker whose jobs allow reuse (``TuneConfig(reuse_actors=True)``): after a task
    that ended well it tells the driver ``("__reusable__", 0)`` instead of exiting, is put
    back clean (environment, working directory, ``sys.path``, ``sys.argv`` as before its
    first job; the user's modules dropped, so the next task imports them afresh) and waits
    for the next ``("assign", job, task)`` of the same kind, or ``("retire",)``. A task that
    failed, or a process grown past ``REUSE_MAX_RSS_MB``, exits as a one-task worker does."""
    import queue

    env, env_data, cwd = dict(os.environ), _environ_data(), os.getcwd()
    path, argv = list(sys.path), list(sys.argv)
    baseline = set(sys.modules)
    exit_handlers = user_exit_handlers()
    clean = str(msg[1].get("reuse")) == "clean"  # CLEAN_REUSE_PREFIX: reused unseen
    control: queue.SimpleQueue = queue.SimpleQueue()
    wc = WorkerChannel(channel, msg[1]["worker_id"])
    wc.idle = control  # frames with no task to hear them: the next assignment, or retire
    threading.Thread(target=wc._read_forever, name="tandem-control", daemon=True).start()
    first = True
    learner: ImportLearner | None = None
    while True:
        job, task_bytes = msg[1], msg[2]
        wc.worker_id = job["worker_id"]
        enter_job(job)
        if not clean:
            os.environ["TANDEM_REUSED_WORKER"] = "1"  # the task may leave state for the next
        working_dir = os.environ.get("TANDEM_WORKING_DIR")
        if working_dir and working_dir not in sys.path:
            sys.path.insert(0, working_dir)
        if learner is None:  # one for every task of this process: what an earlier task
            learner = ImportLearner(channel)  # imported was told already (or is the
            # user's, dropped below and never told), so nothing is told twice
        wc.learner = learner if learner.enabled else None
        # the timed looks (a task silent for long) on the first task only: a later one
        # tells with its frames and its end, and starts no thread
        learner.start(timed=first)
        first = False
        try:
            code = int(cloudpickle.loads(task_bytes)(wc) or 0)
        finally:
            learner.finish()
        wc._handler = None
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if code != 0 or _rss_mb() > float(os.environ.get("TANDEM_REUSE_MAX_RSS_MB",
                                                          REUSE_MAX_RSS_MB)):
            return code
        if clean and _left_running(exit_handlers):
            return code  # a fresh process for the next task: this one is not clean
        # said first, so the driver ends the job and hands over the next task while this
        # process cleans up; the next assignment waits in ``control`` until it is done
        channel.send(("__reusable__", code))
        if names is not None:
            names.idle()  # back in the pool: a warm worker, as one forked ahead of demand
        _restore_environ(env, env_data)
        os.chdir(cwd)
        sys.path[:] = path
        sys.argv[:] = argv
        _drop_user_modules(baseline)
        if clean:
            _reseed()
        msg = control.get()
        if msg[0] != "assign":
            return 0
        if names is not None:
            names.busy()


#: Frameworks whose process-wide state (random generators, default dtype, grad mode, thread
#: pools, device contexts) a task can change and no reset can put back as a fresh process has
#: it: a process that holds one is not reused for another task without ``reuse_actors``.
STATEFUL_FRAMEWORKS = ("torch", "tensorflow", "jax")


def _left_running(exit_handlers: int) -> bool:
    """Whether the task left something running that a fresh process would not have: a
    thread not of tandem's own (a user's daemon thread too), a ``multiprocessing`` child,
    a CUDA context (GPU memory held), a framework with process-wide state loaded
    (``STATEFUL_FRAMEWORKS``), or an ``atexit`` handler of its own: more than the
    ``exit_handlers`` (``user_exit_handlers()``) there were before it (a fresh process
    would have run it as the task ended: this one runs it as it exits, see
    ``run_exit_handlers``)."""
    if any(name in sys.modules for name in STATEFUL_FRAMEWORKS):
        return True
    if _USER_EXIT_HANDLERS > exit_handlers:
        return True
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.name.startswith("tandem-"):
            return True
    mp = sys.modules.get("multiprocessing.process")
    if mp is not None and getattr(mp, "_children", None):
        return True
    cuda = sys.modules.get("torch.cuda")  # a CUDA context holds GPU memory a fresh process
    try:                                   # would not have
        return bool(cuda is not None and cuda.is_initialized())
    except Exception:  # noqa: BLE001 - a torch without CUDA support
        return False


def _reseed() -> None:
    """``random``, ``numpy.random`` and torch's default generators seeded from the OS, as in
    a fresh process: after each fork from the zygote (whose numpy and torch seeded theirs
    once, as they were imported, for all its forks) and between two tasks of a reused
    process (a task that seeded them must not make the next task's draws repeat)."""
    import random

    random.seed()
    np_random = sys.modules.get("numpy.random")
    if np_random is not None:
        try:
            np_random.seed()
        except Exception:  # noqa: BLE001 - a numpy without the legacy global state
            pass
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "seed"):  # a fresh process's torch seeds its
        try:  # generators from the OS too (~60 us; CUDA's is seeded when CUDA starts)
            torch.seed()
        except Exception:  # noqa: BLE001 - a torch half imported or without generators
            pass


def _environ_data() -> dict[bytes, bytes] | None:
    """A copy of ``os.environ``'s encoded mapping (CPython's ``os.environ._data``), for
    ``_restore_environ``'s quick check; None where there is none."""
    data = getattr(os.environ, "_data", None)
    return dict(data) if isinstance(data, dict) else None


def _restore_environ(env: dict[str, str], data: dict[bytes, bytes] | None = None) -> None:
    """``os.environ`` back to ``env``, changing only what differs (``os.environ.clear()``
    walks the mapping once per key: ~1 ms between two trials for nothing). ``data``:
    ``_environ_data()`` taken with ``env``; when the mapping still equals it (one
    comparison of two dicts, ~2 µs), nothing changed and the walk over every key
    (decoding each, ~0.1 ms) is skipped."""
    current = os.environ
    if data is not None and getattr(current, "_data", None) == data:
        return
    for key in [k for k in current if k not in env]:
        del current[key]
    for key, value in env.items():
        if current.get(key) != value:
            current[key] = value


def _rss_mb() -> float:
    try:
        fd = os.open("/proc/self/statm", os.O_RDONLY)
        try:
            data = os.read(fd, 256)
        finally:
            os.close(fd)
        return int(data.split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except (OSError, ValueError, IndexError):
        return 0.0


_INSTALLED_ROOTS: tuple[str, ...] | None = None


def _installed_roots() -> tuple[str, ...]:
    """The standard library's and installed packages' folders (``sysconfig.get_paths()``
    expands its templates on every call, ~1 ms: looked up once per process)."""
    global _INSTALLED_ROOTS
    if _INSTALLED_ROOTS is None:
        import sysconfig

        paths = sysconfig.get_paths()
        _INSTALLED_ROOTS = tuple({paths[k] for k in ("stdlib", "platstdlib", "purelib",
                                                     "platlib")})
    return _INSTALLED_ROOTS


def _drop_user_modules(baseline: set[str]) -> None:
    """Forgets the modules a task imported from the user's code (not tandem's, not
    installed packages or the standard library, which cannot always be imported twice):
    the next task imports them afresh, with fresh module state."""
    added = sys.modules.keys() - baseline  # a set difference: no Python loop over them all
    if not added:
        return
    roots = _installed_roots()
    for name in added:
        if name == "tandem" or name.startswith("tandem."):
            continue
        module = sys.modules.get(name)
        file = getattr(module, "__file__", None)
        if file is None or file.startswith(roots):
            continue  # built in, a namespace package, or installed
        del sys.modules[name]


def _run_task(channel: SocketChannel, worker_id: str, task_bytes: bytes) -> int:
    working_dir = os.environ.get("TANDEM_WORKING_DIR")
    if working_dir and working_dir not in sys.path:
        sys.path.insert(0, working_dir)  # the job's uploaded code (train server runtime_env)
    learner = ImportLearner(channel)
    task = cloudpickle.loads(task_bytes)
    wc = WorkerChannel(channel, worker_id)
    wc.learner = learner if learner.enabled else None
    threading.Thread(target=wc._read_forever, name="tandem-control", daemon=True).start()
    learner.start()
    try:
        return int(task(wc) or 0)
    finally:
        learner.finish()


#: Top-level packages never learned for the zygote: they start threads, open connections
#: or hold state that a fork must not inherit (ray, grpc, trackers), or have their own
#: preload (TensorFlow: ``tandem.train.tensorflow._preload``).
_NEVER_LEARN = frozenset({
    "ray", "grpc", "wandb", "mlflow", "tensorflow", "tf_keras", "keras", "jax", "jaxlib",
    "multiprocess", "dask", "distributed", "IPython", "ipykernel", "zmq", "tornado",
    "uvicorn", "fastapi", "starlette", "httpx", "requests", "urllib3", "psycopg",
    "psycopg2", "sqlalchemy", "pytest", "_pytest",
})

#: Seconds after a task starts at which a worker tells the driver what it imported, for a
#: task that sends nothing for long; it also does ahead of any frame the task sends once
#: ``sys.modules`` grew (e.g. with the first report), and when the task ends. Early enough
#: that a gang restarted after a crash finds warm workers with them, cheap enough to cost
#: nothing per frame (one ``len(sys.modules)``).
LEARN_AFTER_S = (1.0, 5.0, 20.0)


class ImportLearner:
    """Tells the driver which installed modules a task imported: ``("__imports__",
    [name, ...])`` in the order they were imported, each name once. The driver has the
    zygote import them, so the next workers (a gang restarted after a crash, the next
    trial) start with them imported (``docs/warm_workers.md``). The user's own modules are
    never named (each task imports those afresh), nor ``_NEVER_LEARN``'s.
    ``TANDEM_LEARN_IMPORTS=0`` turns it off."""

    def __init__(self, channel: SocketChannel) -> None:
        self._channel = channel
        self._seen = set(sys.modules)
        self.known = len(self._seen)  # len(sys.modules) when last looked: a cheap "changed?"
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.enabled = os.environ.get("TANDEM_LEARN_IMPORTS", "1") != "0"

    def start(self, timed: bool = True) -> None:
        """Starts the timed looks (``LEARN_AFTER_S``) unless ``timed`` is False."""
        if self.enabled and timed:
            threading.Thread(target=self._loop, name="tandem-imports", daemon=True).start()

    def finish(self) -> None:
        self._done.set()
        if self.enabled:
            self.send_new()

    def _loop(self) -> None:
        waited = 0.0
        for at in LEARN_AFTER_S:
            if self._done.wait(at - waited):
                return
            waited = at
            self.send_new()

    def send_new(self) -> None:
        with self._lock:
            current = list(sys.modules)
            self.known = len(current)
            names = [n for n in current if n not in self._seen]
            self._seen.update(names)
            learned = [n for n in names if _learnable(n)]
            if learned:
                try:
                    self._channel.send(("__imports__", learned))
                except OSError:
                    pass


_ROOTS: tuple[str, ...] | None = None


def _learnable(name: str) -> bool:
    global _ROOTS
    if name.partition(".")[0] in _NEVER_LEARN or name == "__main__":
        return False
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str):
        return False  # built in, a namespace package, or not a module
    if _ROOTS is None:
        import sysconfig

        paths = sysconfig.get_paths()
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tandem's own
        _ROOTS = tuple({paths["purelib"], paths["platlib"], here})
    return file.startswith(_ROOTS)
