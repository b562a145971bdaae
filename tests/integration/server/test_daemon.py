"""`tandem server start|status|stop` as a daemon, and the CLI's own checks."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from tests.integration.server.conftest import free_port

pytestmark = pytest.mark.timeout(120)


def tandem(home, *args, **env):
    e = {**os.environ, "HOME": home, **env}
    e.pop("TANDEM_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tandem.cli", *args], env=e,
                          capture_output=True, text=True, timeout=90)


def test_daemon_start_status_second_start_stop(home, tmp_path):
    port = str(free_port())
    storage = str(tmp_path / "srv")
    chosen = "chosen-server-token-" + "x" * 20
    client_token = "client-token-" + "y" * 20
    out = tandem(home, "server", "start", "--port", port, "--storage", storage, "--num-cpus", "1",
                 TANDEM_SERVER_TOKEN=chosen, TANDEM_TOKEN=client_token)
    try:
        assert out.returncode == 0, out.stderr + out.stdout
        assert f"tandem server running at http://127.0.0.1:{port}" in out.stdout
        path = os.path.join(home, ".tandem", "server.json")
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        info = json.load(open(path))
        assert info["address"] == f"http://127.0.0.1:{port}" and info["token"] == chosen
        # The token reached the daemon through its 0600 file, not its environment, which
        # any job of the same user could read (issue 23 item 9).
        assert stat.S_IMODE(os.stat(os.path.join(storage, "token")).st_mode) == 0o600
        with open(f"/proc/{info['pid']}/environ", "rb") as f:
            environ = f.read()
        assert chosen.encode() not in environ and client_token.encode() not in environ
        assert b"TANDEM_SERVER_TOKEN" not in environ

        status = tandem(home, "server", "status")
        assert status.returncode == 0 and "CPU=1" in status.stdout
        again = tandem(home, "server", "start", "--port", port, "--storage", storage)
        assert again.returncode == 1 and "already running" in again.stderr
        other = tandem(str(tmp_path), "server", "start", "--port", port, "--storage", storage + "2")
        assert other.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in other.stderr
        assert "--port" in other.stderr
        listed = tandem(home, "jobs", "list")
        assert listed.returncode == 0 and "(no jobs)" in listed.stdout
        dash = tandem(home, "dashboard")
        assert dash.stdout.strip() == f"http://127.0.0.1:{port}/login#token={info['token']}"
    finally:
        stop = tandem(home, "server", "stop")
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert not os.path.exists(os.path.join(home, ".tandem", "server.json"))
    status = tandem(home, "server", "status")
    assert status.returncode == 1 and "no tandem server is running" in status.stdout


def test_version_and_usage(home):
    out = tandem(home, "version")
    assert out.returncode == 0 and out.stdout.startswith("tandem 0.")
    assert json.loads(tandem(home, "version", "--json").stdout)["version"]
    out = tandem(home, "jobs", "list")
    assert out.returncode == 1 and "tandem server start" in out.stderr
