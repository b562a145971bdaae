"""The warm host: a per-user background process that keeps the zygote's heavy imports warm
across driver processes (``tandem warm start``; docs/warm_workers.md, "A warm host").

A fresh program that forks workers pays, on its critical path, for the zygote's interpreter
and its ``import torch`` (~1.5 s of CPU), again in every new process. The host pays once: it
imports tandem's worker code and what it was told to preload, then waits on a unix socket in
a per-user 0700 folder. For each driver that connects it forks a **per-driver zygote** from
itself whose stdin and stdout are that connection, so the driver speaks the zygote protocol
of ``_zygote`` unchanged, and that zygote, as one the driver spawned, kills every worker it
forked when the connection closes: no worker outlives its driver.

Keys. A host serves only drivers whose imports it is valid for (``host_key``): the same uid,
``sys.executable``, tandem's source folder and version, ``sys.path`` (but its
first entry, the script's folder, which is checked not to shadow a module the host
imported), the folders of ``sys.path`` unchanged on disk (``pip install`` touches them), and
the environment variables that change what an import does (``_IMPORT_ENV``). The socket's
name is the key's digest; the host compares the whole key again. The host itself looks once
a second whether tandem's source files changed, and exits if they did. Everything else (the
driver's environment, working directory, ``sys.path``, umask, resource limits, standard
error) travels in the hello and is applied in the per-driver zygote before it forks anything,
so a worker sees what it would see from a zygote the driver spawned.

Authentication: the folder is the user's (0700, checked), and the host reads nothing from a
peer before ``SO_PEERCRED`` showed the peer runs as the host's own uid; the hello is JSON,
never a pickle. The zygote frames after it are the driver's own, as over a pipe.

Learning: a per-driver zygote reports the modules it imported for its driver (preloads and
learned imports) on a pipe; the host imports them too, one per turn of its loop, a failure
skipped, until an import starts a thread a fork would lose (``_zygote.ThreadCheck``) or
the host's memory passes its bound (PSS, ``$TANDEM_WARM_POOL_MB`` / ``--max-pss-mb``,
default 500 MiB): the next driver starts with them. The host exits after ``--idle-timeout`` seconds (default 900) with no driver connected,
or on ``tandem warm stop``; per-driver zygotes still serving a driver go on until it exits.

Drivers use a running, matching host automatically (``connect``), and fall back silently to
their own zygote when there is none, it doesn't match or doesn't answer within
``$TANDEM_WARM_HOST_TIMEOUT_S`` (default 2 s): the reason is logged at debug level.
``TANDEM_WARM_HOST=0`` never uses one; ``TANDEM_WARM_HOST=auto`` starts one when none runs.
"""

from __future__ import annotations

import errno
import fcntl
import gc
import hashlib
import importlib
import json
import logging
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any, TypedDict, cast

from tandem.cluster import _zygote

logger = logging.getLogger(__name__)

#: tandem's source folder (the package this module is part of)
_TANDEM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SWITCH_ENV = "TANDEM_WARM_HOST"
DIR_ENV = "TANDEM_WARM_DIR"
TIMEOUT_ENV = "TANDEM_WARM_HOST_TIMEOUT_S"
CONNECT_TIMEOUT_S = 2.0
IDLE_TIMEOUT_S = 900.0
#: How often the host looks whether tandem's source files changed (it exits if they did).
SOURCE_CHECK_S = 1.0
MAX_PSS_MB = 500.0
_MAX_HELLO = 4 << 20
_HEADER = struct.Struct(">I")

#: Environment variables that change what an import does (read at import time by Python,
#: the dynamic loader, OpenMP/MKL, CUDA and the frameworks): part of the host's key.
_IMPORT_ENV = ("PYTHON", "LD_", "OMP_", "MKL_", "KMP_", "OPENBLAS_", "CUDA_", "CUBLAS", "CUDNN",
               "NVIDIA_", "TORCH", "PYTORCH_", "TF_", "XLA_", "JAX_", "KERAS_", "HIP_", "ROCM",
               "HSA_", "NUMBA_", "GOTO")

#: ... but these are read when a device is first used (in a worker, after the fork), not at
#: import: they travel in the driver's environment like any other variable.
_RUNTIME_ENV = frozenset({"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES",
                          "ROCR_VISIBLE_DEVICES"})

#: Resource limits a per-driver zygote takes from its driver (a worker inherits them).
_RLIMITS = ("RLIMIT_NOFILE", "RLIMIT_CORE", "RLIMIT_AS", "RLIMIT_DATA", "RLIMIT_STACK",
            "RLIMIT_NPROC", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_MEMLOCK")


class HostKey(TypedDict):
    """What a host's imports depend on (module docstring, "Keys")."""

    uid: int
    executable: str
    tandem: str
    version: str | None
    sys_path: list[str]
    path_mtimes: list[int | None]
    env: dict[str, str]


class Hello(TypedDict, total=False):
    """A request to the host: ``op`` "fork" (with the rest), "status", "stop" or
    "preload:NAME,NAME"."""

    op: str
    key: HostKey
    script_dir: str | None
    env: dict[str, str]
    cwd: str
    sys_path: list[str]
    umask: int
    rlimits: dict[str, list[int]]
    nice: int
    affinity: list[int] | None
    cgroup: str | None


class HostInfo(TypedDict, total=False):
    """A host's status (``tandem warm status --json``)."""

    pid: int
    socket: str
    key: str
    executable: str
    tandem: str
    preloaded: list[str]
    learned: int
    learning: bool
    stopped_learning: str | None
    pss_mb: float
    max_pss_mb: float
    zygotes: list[int]
    served: int
    idle_timeout_s: float
    idle_s: float
    error: str | None
    already: bool
    process: subprocess.Popen[bytes]


# -- the key and the folder (driver and host) --------------------------------------------
def host_dir() -> str:
    """The per-user folder of warm hosts: ``$TANDEM_WARM_DIR``, else ``~/.tandem/warm``."""
    return os.path.expanduser(os.environ.get(DIR_ENV) or os.path.join("~", ".tandem", "warm"))


def _key_path() -> tuple[list[str], str | None]:
    """(``sys.path`` as keyed, the script's folder left out of it or None): the first entry
    is the script's folder (``''`` for ``-c``), which differs from program to program."""
    if sys.flags.safe_path or not sys.path:
        return list(sys.path), None
    first = sys.path[0]
    return list(sys.path[1:]), os.path.abspath(first or os.getcwd())


def _tandem_fingerprint() -> str:
    """tandem's source files' newest modification time and count (2-10 ms: checked by the
    host once a second, off the drivers' path): a host whose tandem code was edited exits."""
    newest = count = 0
    stack = [_TANDEM_DIR]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for e in entries:
            if e.is_dir(follow_symlinks=False):
                if e.name != "__pycache__":
                    stack.append(e.path)
            elif e.name.endswith(".py"):
                count += 1
                newest = max(newest, e.stat().st_mtime_ns)
    return f"{newest}:{count}"


def host_key() -> HostKey:
    """What a host's imports depend on (module docstring, "Keys")."""
    path, _ = _key_path()
    mtimes: list[int | None] = []
    for p in path:
        try:
            mtimes.append(os.stat(p or ".").st_mtime_ns)
        except OSError:
            mtimes.append(None)
    return {
        "uid": os.getuid(),
        "executable": sys.executable,
        "tandem": _TANDEM_DIR,
        "version": getattr(sys.modules.get("tandem"), "__version__", None),
        "sys_path": path,
        "path_mtimes": mtimes,
        "env": {k: v for k, v in sorted(os.environ.items())
                if k.startswith(_IMPORT_ENV) and k not in _RUNTIME_ENV},
    }


def key_digest(key: HostKey) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]


def _ensure_dir(path: str) -> None:
    """Creates the folder 0700, or checks an existing one is this user's and 0700."""
    os.makedirs(path, mode=0o700, exist_ok=True)
    st = os.stat(path)
    if st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise PermissionError(
            f"the warm host folder {path} must belong to uid {os.getuid()} with mode 0700 "
            f"(it has uid {st.st_uid}, mode {oct(st.st_mode & 0o777)}); fix it with "
            f"`chmod 700 {path}` or set ${DIR_ENV} to a folder of your own")


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a unix socket (``SO_PEERCRED``)."""
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def peer_allowed(uid: int) -> bool:
    """Whether a peer running as ``uid`` may use this process's host: only its own uid."""
    return uid == os.getuid()


def admit(conn: socket.socket) -> bool:
    """The host's check of a connection, before it reads anything from it: the peer's uid
    (``SO_PEERCRED``, set by the kernel at ``connect``) must be the host's own."""
    uid = peer_uid(conn)
    if peer_allowed(uid):
        return True
    print(f"tandem warm host: refused a connection from uid {uid} (the host serves uid "
          f"{os.getuid()} only)", file=sys.stderr, flush=True)
    return False


def _send_json(sock: socket.socket, obj: object, fds: Sequence[int] = ()) -> None:
    data = json.dumps(obj).encode()
    msg = _HEADER.pack(len(data)) + data
    if fds:
        sent = socket.send_fds(sock, [msg], list(fds))
        msg = msg[sent:]
    if msg:
        sock.sendall(msg)


def _recv_exact(sock: socket.socket, n: int, fds: list[int] | None = None) -> bytes:
    buf = b""
    while len(buf) < n:
        if fds is not None and not buf:
            data, got, _flags, _addr = socket.recv_fds(sock, n, 4)
            fds.extend(got)
        else:
            data = sock.recv(n - len(buf))
        if not data:
            raise EOFError("the peer closed the connection")
        buf += data
    return buf


def _recv_json(sock: socket.socket, fds: list[int] | None = None) -> dict[str, object]:
    (size,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size, fds))
    if size > _MAX_HELLO:
        raise ValueError(f"a {size}-byte message (at most {_MAX_HELLO})")
    obj = json.loads(_recv_exact(sock, size))
    if not isinstance(obj, dict):
        raise ValueError(f"a message that is not a JSON object: {type(obj).__name__}")
    return obj


# -- the driver's side -------------------------------------------------------------------
def mode() -> str:
    """``$TANDEM_WARM_HOST``: "off" (0/false/no/off), "auto", or "on" (the default: use a
    running host)."""
    raw = os.environ.get(SWITCH_ENV, "").strip().lower()
    if raw in ("0", "false", "no", "off"):
        return "off"
    return "auto" if raw == "auto" else "on"


def _timeout_s() -> float:
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else CONNECT_TIMEOUT_S
    except ValueError:
        return CONNECT_TIMEOUT_S
    return value if value > 0 else CONNECT_TIMEOUT_S


class _SocketWriter:
    """The zygote's "stdin" over the host's connection: what the cluster calls on a pipe."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        fd = self._sock.fileno()
        while view:
            try:
                n = os.write(fd, view)
            except BlockingIOError:  # the reading side made the socket non-blocking
                select.select([], [fd], [])
                continue
            view = view[n:]
        return len(data)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        """End of input for the zygote (it kills its workers and exits), as a pipe's close."""
        try:
            self._sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass


class _SocketReader:
    """The zygote's "stdout": the cluster selects on it and reads its file descriptor."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def fileno(self) -> int:
        return self._sock.fileno()

    def close(self) -> None:
        self._sock.close()


class HostZygote:
    """A per-driver zygote forked by the warm host, with the parts of ``subprocess.Popen``
    that the cluster uses (``stdin``, ``stdout``, ``pid``, ``poll``, ``wait``, ``kill``)."""

    def __init__(self, sock: socket.socket, pid: int, host_pid: int,
                 modules: Sequence[str]) -> None:
        self.pid = pid
        self.host_pid = host_pid
        self.modules = tuple(modules)  # what the host had imported when it forked this one
        self.stdin = _SocketWriter(sock)
        self.stdout = _SocketReader(sock)
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            self.returncode = 0  # gone (the host reaped it)
            return self.returncode
        fields = stat[stat.rfind(b")") + 2:].split()
        if fields and fields[0] in (b"Z", b"X"):
            code = 0
            if len(fields) >= 50:
                try:
                    code = os.waitstatus_to_exitcode(int(fields[49]))
                except ValueError:
                    code = 0
            self.returncode = code
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise subprocess.TimeoutExpired(f"zygote {self.pid}", timeout or 0.0)
            try:
                fd = os.pidfd_open(self.pid)
            except OSError:
                continue  # gone meanwhile: poll() says so
            try:
                select.select([fd], [], [], min(left, 1.0) if left is not None else 1.0)
            finally:
                os.close(fd)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass


def connect() -> HostZygote | None:
    """A per-driver zygote from a running host whose key matches this process's, or None
    (the reason logged at debug level): the caller then spawns a zygote of its own."""
    if mode() == "off":
        return None
    try:
        if mode() != "auto" and not any(n.endswith(".sock") for n in os.listdir(host_dir())):
            logger.debug("no warm host is running (none in %s)", host_dir())
            return None
    except OSError:
        logger.debug("no warm host is running (no folder %s)", host_dir())
        return None
    try:
        key = host_key()
        path = os.path.join(host_dir(), key_digest(key) + ".sock")
        if not os.path.exists(path):
            if mode() != "auto":
                logger.debug("no warm host for this process's key (%s)", path)
                return None
            info = start_host(detach=True)
            if info.get("key") != key_digest(key):  # this program changed its sys.path
                logger.debug("the warm host started on demand has another key")
                if not info.get("already"):
                    request(info["socket"], "stop")
                return None
        return _connect(path, key)
    except (OSError, EOFError, ValueError, subprocess.SubprocessError) as e:
        logger.debug("not using a warm host: %s: %s", type(e).__name__, e)
        return None


def _connect(path: str, key: HostKey) -> HostZygote | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(_timeout_s())
        sock.connect(path)
        if peer_uid(sock) != os.getuid():
            logger.debug("not using the warm host at %s: it runs as another user", path)
            sock.close()
            return None
        _, script_dir = _key_path()
        hello: Hello = {
            # the environment a zygote of this process's own would have (``_spawn_zygote``)
            "op": "fork", "key": key, "script_dir": script_dir,
            "env": {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)},
            "cwd": os.getcwd(), "sys_path": list(sys.path), "umask": _umask(),
            "rlimits": _rlimits(), "nice": os.getpriority(os.PRIO_PROCESS, 0),
            "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
            else None, "cgroup": _cgroup(),
        }
        _send_json(sock, hello, fds=[2])  # the zygote writes to this process's stderr
        reply = _recv_json(sock)
    except BaseException:
        sock.close()
        raise
    if not reply.get("ok"):
        logger.debug("the warm host at %s did not fork a zygote: %s", path, reply.get("why"))
        sock.close()
        return None
    sock.settimeout(None)
    logger.debug("zygote %s forked by the warm host %s", reply["pid"], reply["host_pid"])
    pid, host_pid, modules = reply["pid"], reply["host_pid"], reply["modules"]
    assert isinstance(pid, int) and isinstance(host_pid, int) and isinstance(modules, list)
    return HostZygote(sock, pid, host_pid, modules)


def _cgroup() -> str | None:
    """This process's cgroup v2 path (``/proc/self/cgroup``'s ``0::`` line), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            for line in f:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _rlimits() -> dict[str, list[int]]:
    import resource

    out = {}
    for name in _RLIMITS:
        which = getattr(resource, name, None)
        if which is not None:
            out[name] = list(resource.getrlimit(which))
    return out


def request(path: str, op: str, timeout_s: float = 5.0) -> HostInfo:
    """One "status" or "stop" request to the host listening at ``path``."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout_s)
        sock.connect(path)
        _send_json(sock, {"op": op})
        return cast(HostInfo, _recv_json(sock))


# -- starting, listing and stopping hosts (the CLI) ---------------------------------------
def start_host(preload: Sequence[str] = (), idle_timeout_s: float = IDLE_TIMEOUT_S,
               max_pss_mb: float | None = None, detach: bool = True,
               timeout_s: float = 120.0) -> HostInfo:
    """Starts a host for this process's key (or finds the one running) and waits until it
    listens with ``preload`` imported; its info (pid, socket, modules). ``detach``: in a new
    session (``tandem warm start``), else a child of this process's session (tests)."""
    for name in preload:
        if not name or not all(part.isidentifier() for part in name.split(".")):
            raise ValueError(f"--preload {name!r} is not a module name (such as torch)")
    if not (idle_timeout_s > 0):
        raise ValueError(f"the idle timeout must be a positive number of seconds, not "
                         f"{idle_timeout_s!r}")
    if max_pss_mb is None:
        raw = os.environ.get("TANDEM_WARM_POOL_MB", "").strip()
        max_pss_mb = float(raw) if raw else MAX_PSS_MB
    directory = host_dir()
    _ensure_dir(directory)
    cmd = [sys.executable, "-m", "tandem.cluster.warm_host", "--dir", directory,
           "--idle-timeout", str(idle_timeout_s), "--max-pss-mb", str(max_pss_mb),
           *[a for m in preload for a in ("--preload", m)]]
    log_path = os.path.join(directory, "host.log")
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=log, close_fds=True, start_new_session=detach)
    finally:
        os.close(log)
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
    line = proc.stdout.readline() if ready else b""
    proc.stdout.close()
    if not line:
        proc.kill()
        proc.wait()
        raise OSError(f"the warm host did not start within {timeout_s:g} s; see {log_path}")
    info = cast(HostInfo, json.loads(line))
    if info.get("already"):
        proc.wait()  # it found the host of its key running, asked it to preload, and left
    else:
        info["process"] = proc  # this process's child until it exits (detach: init's then)
    return info


def running_hosts(timeout_s: float = 5.0) -> list[HostInfo]:
    """Every host of this user answering in ``host_dir()`` within ``timeout_s`` (its
    status; a host answers between two imports it learns)."""
    directory = host_dir()
    out = []
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return []
    for name in names:
        if not name.endswith(".sock"):
            continue
        path = os.path.join(directory, name)
        try:
            out.append(request(path, "status", timeout_s))
        except ConnectionRefusedError:
            try:
                os.unlink(path)  # nobody listens: a host that was killed
            except OSError:
                pass
        except (OSError, EOFError, ValueError) as e:  # busy importing, say: left alone
            logger.debug("the warm host at %s did not answer: %s", path, e)
    return out


def stop_hosts(timeout_s: float = 10.0) -> list[HostInfo]:
    """Stops every host of this user; waits for each to exit. Their info."""
    stopped = []
    for info in running_hosts(timeout_s=60.0):
        try:
            request(info["socket"], "stop")
        except (OSError, EOFError, ValueError):
            pass
        pid = int(info["pid"])
        deadline = time.monotonic() + timeout_s
        while _alive(pid) and time.monotonic() < deadline:
            try:
                fd = os.pidfd_open(pid)
            except OSError:
                break
            try:
                select.select([fd], [], [], 0.5)
            finally:
                os.close(fd)
        if _alive(pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        stopped.append(info)
    return stopped


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    fields = stat[stat.rfind(b")") + 2:].split()
    return bool(fields) and fields[0] not in (b"Z", b"X")


# -- the host process --------------------------------------------------------------------
class _Host:
    def __init__(self, path: str, idle_timeout_s: float, max_pss_mb: float, lock: int) -> None:
        self.path = path
        self.lock = lock  # flock'ed while this host lives: one host per key
        self.key = host_key()
        self.idle_timeout_s = idle_timeout_s
        self.max_pss = max_pss_mb * 2**20
        self.zygotes: dict[int, int] = {}  # pid -> read end of its learn pipe
        self.pipes: dict[int, bytes] = {}  # read end -> bytes not yet a whole line
        self.learning: list[str] = []
        self.learned: list[str] = []
        self.stop_learning: str | None = None
        self.preloaded: list[str] = []
        self.pss_mb = 0.0
        self.served = 0
        self.last_active = time.monotonic()
        self.stopping = False
        self.source = _tandem_fingerprint()
        self.next_check = time.monotonic() + SOURCE_CHECK_S
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    def listen(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        old = os.umask(0o077)
        try:
            self.listener.bind(self.path)
        finally:
            os.umask(old)
        self.listener.listen(64)

    def preload(self, modules: Sequence[str]) -> str | None:
        error = None
        for name in modules:
            try:
                importlib.import_module(name)
            except BaseException as e:  # noqa: BLE001 - reported to whoever asked
                error = f"{name}: {type(e).__name__}: {e}"
                continue
            if name not in self.preloaded:
                self.preloaded.append(name)
        gc.freeze()
        self._measure()
        return error

    def status(self) -> HostInfo:
        return {"pid": os.getpid(), "socket": self.path, "key": key_digest(self.key),
                "executable": self.key["executable"], "tandem": self.key["tandem"],
                "preloaded": self.preloaded, "learned": len(self.learned),
                "learning": self.stop_learning is None, "stopped_learning": self.stop_learning,
                "pss_mb": round(self.pss_mb, 1), "max_pss_mb": round(self.max_pss / 2**20, 1),
                "zygotes": sorted(self.zygotes), "served": self.served,
                "idle_timeout_s": self.idle_timeout_s,
                "idle_s": round(time.monotonic() - self.last_active, 1) if not self.zygotes
                else 0.0}

    def _measure(self) -> None:
        try:
            import psutil

            info = psutil.Process().memory_full_info()
            self.pss_mb = float(getattr(info, "pss", info.rss)) / 2**20
        except Exception:  # noqa: BLE001, S110 - no figure: the bound is not enforced
            pass

    def serve(self) -> None:
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.set_wakeup_fd(self._wake_w)
        while not self.stopping:
            if self.zygotes:
                self.last_active = time.monotonic()
            idle_left = self.last_active + self.idle_timeout_s - time.monotonic()
            if idle_left <= 0 and not self.zygotes:
                break
            if time.monotonic() >= self.next_check:
                self.next_check = time.monotonic() + SOURCE_CHECK_S
                if _tandem_fingerprint() != self.source:
                    print("tandem warm host: tandem's source changed; exiting (the next "
                          "`tandem warm start` imports the new code)", file=sys.stderr,
                          flush=True)
                    break
            timeout = 0.0 if self.learning else min(idle_left, SOURCE_CHECK_S)
            try:
                watched: list[Any] = [self.listener, self._wake_r, *self.pipes]
                ready = select.select(watched, [], [], timeout)[0]
            except InterruptedError:
                ready = []
            if self._wake_r in ready:
                _zygote.drain(self._wake_r)
            self._reap()
            for fd in ready:
                if fd in self.pipes:
                    self._read_pipe(fd)
            if self.listener in ready:
                self._accept()
            elif self.learning and not ready:
                self._learn_one()
        try:
            os.unlink(self.path)
        except OSError:
            pass

    def _reap(self) -> None:
        while self.zygotes:
            try:
                pid, _status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            fd = self.zygotes.pop(pid, None)
            if fd is not None and fd in self.pipes:
                self._read_pipe(fd)
            self.last_active = time.monotonic()

    def _read_pipe(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.pipes.pop(fd, None)
            os.close(fd)
            return
        buf = self.pipes[fd] + data
        *lines, rest = buf.split(b"\n")
        self.pipes[fd] = rest
        for line in lines:
            try:
                names = json.loads(line)
            except ValueError:
                continue
            if self.stop_learning is None:
                self.learning.extend(n for n in names if isinstance(n, str)
                                     and n not in sys.modules and n not in self.learning)

    def _learn_one(self) -> None:
        name = self.learning.pop(0)
        if name not in sys.modules:
            check = _zygote.ThreadCheck()
            try:
                importlib.import_module(name)
            except BaseException:  # noqa: BLE001, S110 - a module that cannot load here is skipped
                pass
            else:
                self.learned.append(name)
            started = check.started()
            if started is not None:
                self.stop_learning = f"importing {name!r} started {started}"
                self.learning.clear()
        if not self.learning:
            gc.freeze()
            self._measure()
            if self.pss_mb * 2**20 > self.max_pss and self.stop_learning is None:
                self.stop_learning = (f"the host holds {self.pss_mb:.0f} MiB of PSS (bound "
                                      f"{self.max_pss / 2**20:.0f} MiB)")
            if self.stop_learning:
                print(f"tandem warm host: learns no more imports: {self.stop_learning}",
                      file=sys.stderr, flush=True)

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        self.last_active = time.monotonic()
        try:
            if not admit(conn):  # before anything is read from it
                conn.close()
                return
            conn.settimeout(5.0)
            fds: list[int] = []
            try:
                hello = _recv_json(conn, fds)
                self._handle(conn, hello, fds)
            finally:
                for fd in fds:
                    os.close(fd)
        except (OSError, EOFError, ValueError) as e:
            print(f"tandem warm host: a connection failed: {type(e).__name__}: {e}",
                  file=sys.stderr, flush=True)
        finally:
            conn.close()

    def _handle(self, conn: socket.socket, hello: dict[str, object], fds: list[int]) -> None:
        op = hello.get("op")
        if op == "status":
            _send_json(conn, self.status())
        elif op == "stop":
            self.stopping = True
            _send_json(conn, self.status())
        elif isinstance(op, str) and op.startswith("preload:"):
            error = self.preload([m for m in op[len("preload:"):].split(",") if m])
            _send_json(conn, {**self.status(), "error": error})
        elif op == "fork":
            why = self._mismatch(hello)
            if why is not None or not fds:
                _send_json(conn, {"ok": False, "why": why or "no standard error was passed"})
                return
            self._fork_zygote(conn, cast(Hello, hello), fds[0])
        else:
            _send_json(conn, {"ok": False, "why": f"unknown request {op!r}: expected fork, "
                                                  f"status, stop or preload:NAMES"})

    def _mismatch(self, hello: dict[str, object]) -> str | None:
        key = hello.get("key")
        if not isinstance(key, dict):
            return "no key"
        if key != self.key:
            diff = sorted(k for k in set(key) | set(self.key) if key.get(k) != self.key.get(k))
            return f"the host's imports are not valid for this driver (differs in {diff})"
        for name in ("env", "cwd", "sys_path", "umask", "rlimits", "nice"):
            if name not in hello:
                return f"no {name} in the hello"
        script_dir = hello.get("script_dir")
        if isinstance(script_dir, str):
            try:
                names = {n.split(".")[0] for n in os.listdir(script_dir)
                         if n.endswith((".py", ".pyc", ".so", ".pyd")) or "." not in n}
            except OSError:
                names = set()
            imported = {m.split(".")[0] for m in sys.modules if not m.startswith("__")}
            shadow = sorted(names & imported)  # (a __main__.py beside the script is no module)
            if shadow:
                return (f"the script's folder {script_dir} holds modules the host imported "
                        f"from elsewhere: {shadow[:5]}")
        return None

    def _fork_zygote(self, conn: socket.socket, hello: Hello, stderr_fd: int) -> None:
        learn_r, learn_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(learn_r)
            code = 1
            try:
                code = self._become_zygote(conn, hello, stderr_fd, learn_w)
            finally:
                os._exit(code)
        os.close(learn_w)
        os.set_blocking(learn_r, False)
        self.zygotes[pid] = learn_r
        self.pipes[learn_r] = b""
        self.served += 1

    def _become_zygote(self, conn: socket.socket, hello: Hello, stderr_fd: int,
                       learn_w: int) -> int:
        """In the forked child: take on the driver's state, then serve it as its zygote."""
        import resource

        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        self.listener.close()
        for fd in (self._wake_r, self._wake_w, self.lock, *self.pipes):
            os.close(fd)
        os.setsid()  # not in the host's session: `tandem warm stop` leaves a driver's zygote
        try:  # what the driver's own zygote would inherit from it, or no zygote at all
            what = "control group"
            cgroup = hello.get("cgroup")
            if cgroup is not None and cgroup != _cgroup():
                with open(os.path.join("/sys/fs/cgroup", cgroup.lstrip("/"), "cgroup.procs"),
                          "w") as f:
                    f.write(str(os.getpid()))
            what = "resource limits"
            for name, (soft, hard) in hello["rlimits"].items():
                which = getattr(resource, name, None)
                if which is not None and resource.getrlimit(which) != (soft, hard):
                    resource.setrlimit(which, (soft, hard))
            what = "scheduling priority"
            if os.getpriority(os.PRIO_PROCESS, 0) != hello["nice"]:
                os.setpriority(os.PRIO_PROCESS, 0, int(hello["nice"]))
            what = "CPU affinity"
            affinity = hello.get("affinity")
            if affinity is not None and sorted(os.sched_getaffinity(0)) != affinity:
                os.sched_setaffinity(0, affinity)
        except (OSError, ValueError) as e:
            _send_json(conn, {"ok": False, "why": f"cannot take on the driver's {what}: {e}"})
            return 1
        os.dup2(stderr_fd, 2)
        os.close(stderr_fd)
        os.dup2(2, 1)  # what an import prints must not corrupt the frame stream
        os.environ.clear()
        os.environ.update(hello["env"])
        os.chdir(hello["cwd"])
        sys.path[:] = hello["sys_path"]
        os.umask(int(hello["umask"]))
        _zygote._set_process_name(b"tandem-zygote")
        _send_json(conn, {"ok": True, "pid": os.getpid(), "host_pid": os.getppid(),
                          "modules": sorted(sys.modules)})
        conn.settimeout(None)
        fd = os.dup(conn.fileno())
        conn.close()
        os.set_blocking(learn_w, False)
        try:
            _DriverZygote(fd, os.dup(fd), learn_w).serve()
        except BrokenPipeError:
            pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        return 0


class _DriverZygote(_zygote._Zygote):
    """A per-driver zygote: tells the host what it imported for its driver."""

    def __init__(self, inp: int, out: int, report_fd: int) -> None:
        super().__init__(inp, out)
        self._report_fd = report_fd

    def _report(self, names: Sequence[str]) -> None:
        names = [n for n in names if n in sys.modules]
        if not names or self._report_fd < 0:
            return
        try:
            os.write(self._report_fd, json.dumps(names).encode() + b"\n")
        except OSError as e:  # the host is gone, or its pipe is full: it misses these
            if e.errno in (errno.EPIPE, errno.EBADF):
                self._report_fd = -1

    def _handle(self, msg: tuple) -> None:
        super()._handle(msg)
        if msg[0] == "preload":
            self._report(msg[1])

    def _learn_one(self) -> None:
        name = self._learning[0] if self._learning else None
        super()._learn_one()
        if name is not None:
            self._report([name])

    def _become_worker(self, spec: dict) -> None:
        if self._report_fd >= 0:
            os.close(self._report_fd)  # a worker has nothing to tell the host
        super()._become_worker(spec)


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="python -m tandem.cluster.warm_host")
    p.add_argument("--dir", required=True)
    p.add_argument("--preload", action="append", default=[])
    p.add_argument("--idle-timeout", type=float, default=IDLE_TIMEOUT_S)
    p.add_argument("--max-pss-mb", type=float, default=MAX_PSS_MB)
    a = p.parse_args(argv)
    out = os.dup(1)
    os.dup2(2, 1)  # imports that print go to the host's log
    importlib.import_module("tandem.cluster._worker_main").mark_worker_process()
    import traceback  # noqa: F401 - workers print tracebacks; imported once here

    _zygote._load_prctl()
    try:
        with open("/proc/self/comm", "rb") as f:
            _zygote._NAME = f.read().strip()  # what a worker is named once it has a job
    except OSError:
        pass
    _zygote._set_process_name(b"tandem-host")
    key = host_key()
    path = os.path.join(a.dir, key_digest(key) + ".sock")
    lock = os.open(path[:-len(".sock")] + ".lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:  # the host of this key runs (or is starting): ask it instead
        info: HostInfo = {}
        deadline = time.monotonic() + 120.0
        while True:
            try:
                op = "preload:" + ",".join(a.preload) if a.preload else "status"
                info = request(path, op, timeout_s=120.0)
                break
            except (OSError, EOFError, ValueError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)  # it is still importing before it listens
        os.write(out, json.dumps({**info, "already": True}).encode() + b"\n")
        os._exit(0)
    host = _Host(path, a.idle_timeout, a.max_pss_mb, lock)
    error = host.preload(a.preload)
    host.listen()
    os.write(out, json.dumps({**host.status(), "error": error}).encode() + b"\n")
    os.close(out)
    host.serve()
    os._exit(0)


if __name__ == "__main__":
    main()
