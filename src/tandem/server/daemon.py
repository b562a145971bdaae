"""Running the server: in the foreground (``python -m tandem.server``), or as a daemon
(``tandem server start``), and stopping it (``tandem server stop``).

A running server writes ``~/.tandem/server.json`` (mode 0600): its address, token, pid and
folders; local clients read it to connect with no flags. The token is kept in the server's
storage folder (``token``, mode 0600), so a restarted server keeps it and clients of the
earlier one keep working.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from typing import Any

from tandem._core.errors import ConfigError, TandemError
from tandem.jobs.client import read_server_file, server_file_path
from tandem.server.auth import new_token
from tandem.server.config import DEFAULT_HOST, DEFAULT_PORT, DEFAULT_STORAGE, ServerConfig

TOKEN_ENV = "TANDEM_SERVER_TOKEN"
logger = logging.getLogger("tandem.server")


# --------------------------------------------------------------------------- arguments


def add_server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=DEFAULT_HOST,
                   help="address to listen on (default 127.0.0.1: this machine only; any "
                        "other address needs --expose)")
    p.add_argument("--expose", action="store_true",
                   help="allow --host to be an address other machines reach (0.0.0.0, a LAN "
                        "address): anyone who can reach it and has the token runs code here; "
                        "use --tls-cert/--tls-key")
    p.add_argument("--tls-cert", default=None,
                   help="serve HTTPS with this certificate (PEM); needs --tls-key")
    p.add_argument("--tls-key", default=None, help="the private key (PEM) of --tls-cert")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help="TCP port (default 8267)")
    p.add_argument("--storage", default=DEFAULT_STORAGE,
                   help="the server's folder: job store, uploads, log (default ~/.tandem/server)")
    p.add_argument("--db", default=None,
                   help="job store URL, e.g. postgresql://user@host/db (default: SQLite in --storage)")
    p.add_argument("--num-cpus", type=float, default=None, help="CPUs to schedule")
    p.add_argument("--num-gpus", type=float, default=None, help="GPUs to schedule")
    p.add_argument("--memory", type=float, default=None, help="bytes of memory to schedule")
    p.add_argument("--resources", default=None, help='custom resources as JSON, e.g. \'{"tpu": 4}\'')
    p.add_argument("--ray-address", default=None,
                   help="run jobs on this Ray cluster ('auto' or HOST:PORT) instead of locally")
    p.add_argument("--ray-autoscaling", action="store_true",
                   help="the Ray cluster autoscales: ask it for room for waiting jobs")
    p.add_argument("--max-upload-mb", type=float, default=100.0,
                   help="largest job payload or working_dir upload (default 100)")
    p.add_argument("--reserve-after-s", type=float, default=30.0,
                   help="how long a blocked large job lets smaller ones backfill ahead of it")
    p.add_argument("--scheduling", choices=("fifo", "fair", "priority"), default="fifo",
                   help="admission policy: fifo (default), fair (quotas, fair share), "
                        "priority (that, plus preemption with a checkpoint)")
    p.add_argument("--quotas", default=None,
                   help='per-owner quotas as JSON, e.g. \'{"alice": {"cpus": 8, "gpus": 2}, '
                        '"*": {"queued_jobs": 100}}\' (needs --scheduling fair|priority)')
    p.add_argument("--usage-interval-s", type=float, default=5.0,
                   help="how often to sample workers' CPU/memory/GPU use (0: never)")


def config_from_args(a: argparse.Namespace) -> ServerConfig:
    resources: dict[str, float] = {}
    if a.resources:
        try:
            resources = {str(k): float(v) for k, v in json.loads(a.resources).items()}
        except (ValueError, AttributeError, TypeError) as e:
            raise ConfigError(
                f"--resources {a.resources!r} is not a JSON object of numbers "
                f"(e.g. '{{\"tpu\": 4}}'): {e}"
            ) from None
    quotas: Any = {}
    if getattr(a, "quotas", None):
        try:
            quotas = json.loads(a.quotas)
        except ValueError:
            quotas = None
        if not isinstance(quotas, dict):
            raise ConfigError(
                f"--quotas {a.quotas!r} is not a JSON object of owner -> quota "
                f"(e.g. '{{\"alice\": {{\"cpus\": 8}}}}')."
            )
    return ServerConfig(
        scheduling=getattr(a, "scheduling", "fifo"), quotas=quotas,
        host=a.host, port=a.port, storage=a.storage, db=a.db, num_cpus=a.num_cpus,
        num_gpus=a.num_gpus, memory=a.memory, resources=resources,
        ray_address=a.ray_address, ray_autoscaling=a.ray_autoscaling,
        max_upload_bytes=int(a.max_upload_mb * 2**20), reserve_after_s=a.reserve_after_s,
        usage_interval_s=a.usage_interval_s, expose=a.expose,
        tls_cert=a.tls_cert, tls_key=a.tls_key,
    )


def server_argv(a: argparse.Namespace) -> list[str]:
    """The flags of ``python -m tandem.server`` for the same settings."""
    out = ["--host", a.host, "--port", str(a.port), "--storage", a.storage,
           "--max-upload-mb", str(a.max_upload_mb), "--reserve-after-s", str(a.reserve_after_s),
           "--usage-interval-s", str(a.usage_interval_s)]
    if getattr(a, "scheduling", "fifo") != "fifo":
        out += ["--scheduling", a.scheduling]
    for flag, value in (("--quotas", getattr(a, "quotas", None)),
                        ("--db", a.db), ("--num-cpus", a.num_cpus), ("--num-gpus", a.num_gpus),
                        ("--memory", a.memory), ("--resources", a.resources),
                        ("--ray-address", a.ray_address), ("--tls-cert", a.tls_cert),
                        ("--tls-key", a.tls_key)):
        if value is not None:
            out += [flag, str(value)]
    if a.ray_autoscaling:
        out.append("--ray-autoscaling")
    if a.expose:
        out.append("--expose")
    return out


# --------------------------------------------------------------------------- helpers


def display_host(host: str) -> str:
    """The host local clients use: loopback for a wildcard bind."""
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    if host == "::":
        return "[::1]"
    return f"[{host}]" if ":" in host else host


def bound_address(sock: socket.socket) -> str:
    """What the socket really listens on, e.g. ``0.0.0.0:8267 (every IPv4 interface)``."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if host in ("0.0.0.0", "::"):
        shown += " (every interface)"
    return shown


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or a ConfigError that says the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)  # asyncio sets TCP_NODELAY only then
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(
            f"cannot listen on {host}:{port}: {e.strerror or e}. Another program (or another "
            f"tandem server) uses that port: see `tandem server status`, stop it with "
            f"`tandem server stop`, or pick another port with --port."
        ) from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def load_or_make_token(storage: str) -> str:
    token = os.environ.get(TOKEN_ENV)
    path = os.path.join(storage, "token")
    if not token:
        try:
            with open(path) as f:
                token = f.read().strip()
        except OSError:
            token = ""
    if not token:
        token = new_token()
    os.makedirs(storage, mode=0o700, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token)
    return token


def write_server_file(info: Mapping[str, object]) -> None:
    path = server_file_path()
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=2)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def remove_server_file(pid: int | None = None) -> None:
    info = read_server_file()
    if info is None:
        return
    if pid is not None and info.get("pid") != pid:
        return  # another server wrote it since
    try:
        os.unlink(server_file_path())
    except OSError:
        pass


def ping(url: str, token: str, timeout_s: float = 2.0,
         verify: str | bool = True) -> dict[str, Any] | None:
    """The server's health answer (a store outage included), or None if it does not answer.
    ``verify``: True, or the certificate file of a server with a self-signed one."""
    import ssl

    import httpx

    check: ssl.SSLContext | bool = True
    if isinstance(verify, str):
        try:
            check = ssl.create_default_context(cafile=verify)
        except (OSError, ssl.SSLError):
            check = True
    try:
        r = httpx.get(f"{url}/api/health", headers={"Authorization": f"Bearer {token}"},
                      timeout=timeout_s, verify=check)
        return r.json() if r.status_code in (200, 503) else None
    except (httpx.HTTPError, ValueError):
        return None


def running_server() -> dict[str, Any] | None:
    """The local server named in server.json, if it answers."""
    info = read_server_file()
    if not info or "address" not in info:
        return None
    ok = ping(info["address"], info.get("token", ""), verify=info.get("tls_cert") or True)
    return info if ok else None


def pid_file_path(storage: str) -> str:
    """``<storage>/server.pid``: the running server's pid and address (JSON), so it can be
    stopped even when ``~/.tandem/server.json`` is damaged or was overwritten."""
    return os.path.join(os.path.abspath(os.path.expanduser(storage)), "server.pid")


def read_pid_file(storage: str) -> dict[str, Any] | None:
    try:
        with open(pid_file_path(storage)) as f:
            info = json.load(f)
        return info if isinstance(info, dict) and isinstance(info.get("pid"), int) else None
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- foreground


def run_foreground(config: ServerConfig, ready_message: bool = True) -> int:
    """Runs the server in this process until SIGTERM/SIGINT; returns an exit code."""
    import uvicorn

    from tandem.server.app import create_app
    from tandem.server.core import TrainServer
    from tandem.server.warmup import start_warmup

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    sock = bind(config.host, config.port)
    port = sock.getsockname()[1]
    os.environ.pop("TANDEM_ADDRESS", None)  # workers here train in the server, never submit to it
    token = load_or_make_token(config.storage_path)
    # No secret reaches a job: workers inherit this process's environment.
    for name in (TOKEN_ENV, "TANDEM_TOKEN"):
        os.environ.pop(name, None)
    scheme = "https" if config.tls_cert else "http"
    url = f"{scheme}://{display_host(config.host)}:{port}"
    pid = os.getpid()
    try:
        server = TrainServer(config, owner={"address": url, "storage": config.storage_path})
    except BaseException:
        sock.close()
        raise
    # what the first job would otherwise import in its own time (server.warmup)
    server.warmup = start_warmup(getattr(server.cluster, "prewarm", None))
    app = create_app(server, token)
    uv = _Uvicorn(uvicorn.Config(app, log_level="warning", access_log=False,
                                 timeout_graceful_shutdown=2, lifespan="off",
                                 ssl_certfile=config.tls_cert, ssl_keyfile=config.tls_key))
    info = {
        "address": url, "token": token, "pid": pid, "host": config.host, "port": port,
        "bound": bound_address(sock), "storage": config.storage_path,
        "db": getattr(server.store, "url", config.db_url),
        "log": os.path.join(config.storage_path, "server.log"), "started_at": time.time(),
        "cluster": (f"Ray at {config.ray_address}" if config.ray_address is not None
                    else "this machine"),
    }
    if config.tls_cert:
        info["tls_cert"] = os.path.abspath(config.tls_cert)
    write_server_file(info)
    _write_pid_file(config.storage_path, {"pid": pid, "address": url})
    if ready_message:
        print(f"tandem server listening on {info['bound']} over {scheme.upper()} (pid {pid}); "
              f"local clients use {url}; token in {server_file_path()}", flush=True)
        if config.exposed:
            print(f"warning: listening beyond this machine ({info['bound']}): anyone who reaches "
                  f"it with the token can run code here"
                  + ("" if config.tls_cert else "; traffic, token included, is NOT encrypted "
                     "(give --tls-cert and --tls-key)"), flush=True)
    try:
        uv.run(sockets=[sock])
    finally:
        server.close()
        remove_server_file(pid)
        _remove_pid_file(config.storage_path, pid)
    return 0


def _write_pid_file(storage: str, info: dict[str, object]) -> None:
    path = pid_file_path(storage)
    tmp = f"{path}.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f)
    os.replace(tmp, path)


def _remove_pid_file(storage: str, pid: int) -> None:
    info = read_pid_file(storage)
    if info is not None and info.get("pid") == pid:
        try:
            os.unlink(pid_file_path(storage))
        except OSError:
            pass


def _uvicorn_server_cls() -> Any:
    import contextlib
    import threading

    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, except that SIGTERM/SIGINT end ``run()`` normally (uvicorn re-
        raises the signal afterwards, which would kill us before we store what is queued)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            sigs = (signal.SIGINT, signal.SIGTERM)
            original = {sig: signal.signal(sig, self.handle_exit) for sig in sigs}
            try:
                yield
            finally:
                for sig, handler in original.items():
                    signal.signal(sig, handler)

    return Server


def _Uvicorn(config: object) -> Any:
    return _uvicorn_server_cls()(config)


def main_foreground(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="python -m tandem.server",
                                description="Run the tandem train server in the foreground.")
    add_server_args(p)
    p.add_argument("--foreground", action="store_true", help="(always on here)")
    a = p.parse_args(argv)
    try:
        return run_foreground(config_from_args(a))
    except TandemError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


# --------------------------------------------------------------------------- daemon


def start_daemon(a: argparse.Namespace, wait_s: float = 60.0) -> dict[str, Any]:
    """Starts ``python -m tandem.server`` detached; returns server.json once it answers.

    Raises:
        TandemError: a server is already running, the port is taken, or it did not start.
    """
    config = config_from_args(a)
    running = running_server()
    if running is not None:
        raise TandemError(
            f"a tandem server is already running at {running['address']} (pid "
            f"{running.get('pid')}); stop it with `tandem server stop` first."
        )
    bind(config.host, config.port).close()  # a clear error now if the port is taken
    storage = config.storage_path
    token = load_or_make_token(storage)
    log_path = os.path.join(storage, "server.log")
    log = open(log_path, "ab")
    log_start = log.seek(0, os.SEEK_END)  # what this start writes comes after
    # The token reaches the server through <storage>/token (0600, written above), never its
    # environment: /proc/<pid>/environ keeps what a process started with, readable by every
    # job running as the same user, and os.environ.pop does not clear it.
    env = dict(os.environ)
    for name in (TOKEN_ENV, "TANDEM_TOKEN", "TANDEM_ADDRESS"):
        env.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tandem.server", *server_argv(a)],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
        close_fds=True,
    )
    log.close()
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise TandemError(
                f"the tandem server exited at start (code {code}):\n"
                f"{_tail(log_path, start=log_start)}"
            )
        info = read_server_file()
        if info and info.get("pid") == proc.pid and ping(
                info["address"], token, 1.0, verify=info.get("tls_cert") or True):
            return info
        time.sleep(0.1)
    proc.terminate()
    raise TandemError(f"the tandem server did not answer within {wait_s:.0f} s; see {log_path}")


def _tail(path: str, n: int = 20, start: int = 0) -> str:
    try:
        with open(path, errors="replace") as f:
            f.seek(start)
            return "".join(f.readlines()[-n:])
    except OSError:
        return ""


def _is_server_process(pid: int) -> bool:
    try:
        import psutil

        cmd = psutil.Process(pid).cmdline()
        text = " ".join(cmd)
        # `python -m tandem.server ...`, or `tandem server start --foreground`
        return "tandem.server" in text or ("server" in cmd and "start" in cmd
                                           and any("tandem" in c for c in cmd))
    except Exception:  # noqa: BLE001
        return False


def stop_daemon(timeout_s: float = 30.0, storage: str = DEFAULT_STORAGE) -> dict[str, object] | None:
    """SIGTERMs the local server (running jobs stay recorded and are re-queued at its next
    start); returns what is known of it (server.json, else its pid file), or None if none
    was running.

    The server is found through ``~/.tandem/server.json``; when that file is missing,
    damaged or names a process that is not a tandem server, through the pid file in its
    storage folder (``storage``, default ``~/.tandem/server``).
    """
    info = read_server_file()
    pid = _pid_of(info)
    if pid is None or not _is_server_process(pid):
        info = read_pid_file(os.path.abspath(os.path.expanduser(storage)))
        pid = _pid_of(info)
        if pid is None or not _is_server_process(pid):
            return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.kill(pid, signal.SIGKILL)
    remove_server_file(pid)
    assert info is not None
    return info


def _pid_of(info: dict[str, Any] | None) -> int | None:
    try:
        pid = int((info or {}).get("pid") or 0)
    except (TypeError, ValueError):
        return None
    return pid if pid > 0 else None


def _alive(pid: int) -> bool:
    try:
        import psutil

        p = psutil.Process(pid)
        return p.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001
        return False
