"""End-to-end user scripts: each documented entry point run as a user runs it.

Every test runs a script from ``scripts/`` (or the ``tandem`` CLI) in a fresh Python
process, through the public API only, with ``HOME`` and the default storage path in a
temporary folder, and asserts what the user sees: the exit code, the printed lines, the
files on disk. These catch a seam between layers breaking, which unit tests of each side
cannot.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pytest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "scripts")
SCRIPT_TIMEOUT_S = 150


@dataclass
class UserEnv:
    """A user's machine for one test: a home folder and the default storage path."""

    home: str

    @property
    def storage(self) -> str:
        return os.path.join(self.home, "tandem_results")

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "HOME": self.home, "TANDEM_STORAGE_PATH": self.storage}
        for key in ("TANDEM_ADDRESS", "TANDEM_TOKEN"):
            env.pop(key, None)
        env.update(extra)
        return env

    def python(self, script: str, *args: str, env: Mapping[str, str] | None = None,
               timeout_s: float = SCRIPT_TIMEOUT_S, check: bool = True,
               cwd: str | None = None) -> str:
        """Runs ``scripts/<script>`` (or a script path) as ``python script.py ARGS`` in
        ``cwd`` (default: the home folder); returns its stdout and fails the test (with
        the output) on a non-zero exit."""
        path = script if os.path.isabs(script) else os.path.join(SCRIPTS, script)
        proc = subprocess.run([sys.executable, path, *args],
                              cwd=cwd or self.home, env=dict(env or self.env()),
                              capture_output=True,
                              text=True, timeout=timeout_s, check=False)
        if check:
            assert proc.returncode == 0, _failure(script, proc)
        return proc.stdout

    def cli(self, *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 60,
            ok: bool = True) -> subprocess.CompletedProcess:
        """Runs ``tandem ARGS`` (the installed console script when there is one)."""
        proc = subprocess.run([*tandem_command(), *args], cwd=self.home,
                              env=dict(env or self.env()), capture_output=True, text=True,
                              timeout=timeout_s, check=False)
        if ok:
            assert proc.returncode == 0, _failure("tandem " + " ".join(args), proc)
        return proc


def tandem_command() -> list[str]:
    beside = os.path.join(os.path.dirname(sys.executable), "tandem")
    if os.path.exists(beside):
        return [beside]
    return [sys.executable, "-m", "tandem.cli"]


def _failure(what: str, proc: subprocess.CompletedProcess) -> str:
    return (f"{what} exited with {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
            f"\n--- stderr\n{proc.stderr[-4000:]}")


def line(out: str, key: str) -> str:
    """The rest of the printed line that starts with ``key`` (fails if none)."""
    for row in out.splitlines():
        if row.startswith(key + " "):
            return row[len(key) + 1:]
    raise AssertionError(f"no line starting with {key!r} in:\n{out}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def user(tmp_path) -> UserEnv:
    home = tmp_path / "home"
    home.mkdir()
    return UserEnv(str(home))


@dataclass
class Server:
    """A train server started with ``tandem server start`` for a user."""

    user: UserEnv
    address: str
    pid: int

    def env(self, **extra: str) -> dict[str, str]:
        return self.user.env(TANDEM_ADDRESS=self.address, **extra)


def start_server(user: UserEnv) -> Server:
    port = free_port()
    out = user.cli("server", "start", "--port", str(port), "--num-cpus", "2",
                   "--usage-interval-s", "0", timeout_s=90).stdout
    assert f"127.0.0.1:{port}" in out, out
    with open(os.path.join(user.home, ".tandem", "server.json")) as f:
        info = json.load(f)
    return Server(user, f"127.0.0.1:{port}", int(info["pid"]))


def stop_server(server: Server) -> None:
    proc = server.user.cli("server", "stop", ok=False)
    deadline = time.monotonic() + 30
    while _pid_alive(server.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if _pid_alive(server.pid):  # never leave a daemon behind
        os.kill(server.pid, 9)
        raise AssertionError(f"`tandem server stop` left the server running: {proc.stdout}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie the init process has not reaped yet counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    """One train server shared by a module's tests (started and stopped with the CLI)."""
    home = tmp_path_factory.mktemp("server_home")
    srv = start_server(UserEnv(str(home)))
    try:
        yield srv
    finally:
        stop_server(srv)
