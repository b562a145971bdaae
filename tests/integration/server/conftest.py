"""A real train server in a subprocess, on a free port, with HOME in a temp folder."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass

import httpx
import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class ServerProc:
    proc: subprocess.Popen
    home: str
    storage: str
    port: int
    url: str
    token: str
    log: str

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def http(self, token: str | None = "") -> httpx.Client:
        tok = self.token if token == "" else token
        headers = {"Authorization": f"Bearer {tok}"} if tok else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "HOME": self.home, "TANDEM_ADDRESS": self.address}
        env.pop("TANDEM_TOKEN", None)
        env.update(extra)
        return env

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def log_text(self) -> str:
        with open(self.log, errors="replace") as f:
            return f.read()


def start_server(home: str, storage: str, port: int | None = None, *extra: str,
                 timeout_s: float = 60) -> ServerProc:
    port = port or free_port()
    os.makedirs(storage, exist_ok=True)
    log = os.path.join(storage, "test-server.log")
    env = {**os.environ, "HOME": home}
    env.pop("TANDEM_ADDRESS", None)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tandem.server", "--port", str(port), "--storage", storage,
             "--num-cpus", "2", "--usage-interval-s", "0.3", *extra],
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        )
    info_path = os.path.join(home, ".tandem", "server.json")
    verify: ssl.SSLContext | bool = (ssl.create_default_context(
        cafile=extra[extra.index("--tls-cert") + 1]) if "--tls-cert" in extra else True)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}:\n{open(log).read()}")
        try:
            with open(info_path) as f:
                info = json.load(f)
            if info["pid"] == proc.pid:
                r = httpx.get(info["address"] + "/api/health",
                              headers={"Authorization": f"Bearer {info['token']}"}, timeout=2,
                              verify=verify)
                if r.status_code == 200:
                    return ServerProc(proc, home, storage, port, info["address"], info["token"], log)
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            pass
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"server did not start:\n{open(log).read()}")


def run_client(srv: ServerProc, code: str, cwd: str, *args: str, timeout: float = 90,
               **env: str) -> subprocess.CompletedProcess:
    """Runs a client script in its own process (it exits when done)."""
    path = os.path.join(cwd, "client_script.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(code))
    return subprocess.run([sys.executable, path, *args], cwd=cwd, env=srv.env(**env),
                          capture_output=True, text=True, timeout=timeout)


def cli(srv: ServerProc, *args: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tandem.cli", *args], env=srv.env(**env),
                          capture_output=True, text=True, timeout=timeout)


def wait_state(srv: ServerProc, job_id: str, states: tuple[str, ...], timeout_s: float = 60) -> dict:
    with srv.http() as c:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            job = c.get(f"/api/jobs/{job_id}").json()
            if job["state"] in states:
                return job
            time.sleep(0.05)
    raise AssertionError(f"job {job_id} is {job['state']}, not in {states}")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """One server for a test module (HOME points into a temp folder for its lifetime)."""
    root = tmp_path_factory.mktemp("server")
    home = str(root / "home")
    os.makedirs(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", home)
        mp.delenv("TANDEM_ADDRESS", raising=False)
        mp.delenv("TANDEM_TOKEN", raising=False)
        srv = start_server(home, str(root / "storage"), None, "--max-upload-mb", "1")
        try:
            yield srv
        finally:
            srv.stop()


@pytest.fixture
def home(tmp_path, monkeypatch):
    """HOME in a temp folder, so ~/.tandem of the developer is never touched."""
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    monkeypatch.delenv("TANDEM_TOKEN", raising=False)
    return str(h)
