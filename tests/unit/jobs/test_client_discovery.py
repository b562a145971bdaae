"""Where a job goes with no address: the train server running on this machine (the one
``~/.tandem/server.json`` names, if it answers), else this process; ``TANDEM_ADDRESS=local``
forces this process. And what a job sent to a server brings: the script's folder."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import types
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tandem._core.errors import ConfigError
from tandem.jobs import runtime
from tandem.jobs.client import RemoteJobService, resolve_connection
from tandem.jobs.client.discovery import find_local_server, server_file_path
from tandem.jobs.client.packaging import package_working_dir, script_folder
from tandem.jobs.service import LocalJobService

TOKEN = "s3cret"


class _Health(BaseHTTPRequestHandler):
    """Stands in for a train server's ``/api/health`` (the token checked as it does)."""

    def do_GET(self):  # noqa: N802 - http.server's name
        ok = self.path == "/api/health" and \
            self.headers.get("Authorization") == f"Bearer {TOKEN}"
        body = json.dumps({"version": "x"} if ok else {"detail": "no"}).encode()
        self.send_response(200 if ok else 401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def health_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


def _write_server_file(address: str, token: str = TOKEN) -> None:
    path = server_file_path()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump({"address": address, "token": token, "pid": 1}, f)


@pytest.fixture(autouse=True)
def _own_home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    yield
    runtime.shutdown_service()


def test_the_session_home_is_not_the_real_one():
    from tests import conftest

    assert conftest.SESSION_HOME != conftest.REAL_HOME
    assert not any(k in os.environ for k in ("TANDEM_ADDRESS", "TANDEM_TOKEN",
                                             "TANDEM_STORAGE_PATH", "TANDEM_MODELS_PATH"))


def test_no_server_file_runs_here_and_says_so(capsys):
    assert find_local_server() is None
    service = runtime.get_service()
    assert isinstance(service, LocalJobService)
    err = capsys.readouterr().err
    assert err.count("tandem: no train server is running on this machine; running jobs in "
                     "this process") == 1
    assert "TANDEM_ADDRESS=local" in err


def test_a_running_local_server_gets_the_jobs_and_that_is_said(health_server, capsys):
    _write_server_file(health_server)
    found = find_local_server()
    assert found is not None and found.url == health_server and found.token == TOKEN
    service = runtime.get_service()
    assert isinstance(service, RemoteJobService) and service.address == health_server
    assert service.connection.token == TOKEN
    err = capsys.readouterr().err
    assert (f"tandem: sending jobs to the train server running on this machine at "
            f"{health_server}") in err


def test_tandem_address_local_forces_this_process(health_server, capsys, monkeypatch):
    _write_server_file(health_server)
    monkeypatch.setenv("TANDEM_ADDRESS", "local")
    assert isinstance(runtime.get_service(), LocalJobService)
    assert capsys.readouterr().err == ""  # a forced choice is not announced
    with pytest.raises(ConfigError, match="run in this process"):
        resolve_connection("local")
    # the CLI's commands, which need a server, still find the local one
    assert resolve_connection()[0] == health_server


def test_a_stale_or_foreign_server_file_is_not_a_server(health_server):
    _write_server_file(health_server, token="wrong")  # answers 401: not ours
    assert find_local_server() is None
    with ThreadingHTTPServer(("127.0.0.1", 0), _Health) as gone:
        port = gone.server_address[1]
    _write_server_file(f"http://127.0.0.1:{port}")  # nothing listens there any more
    assert find_local_server(timeout_s=0.5) is None
    with open(server_file_path(), "w") as f:
        f.write("{not json")
    assert find_local_server() is None


def test_script_folder_is_the_running_scripts(tmp_path, monkeypatch):
    script = tmp_path / "proj" / "train.py"
    script.parent.mkdir()
    script.write_text("")
    main = types.ModuleType("__main__")
    main.__file__ = str(script)
    main.__spec__ = None
    monkeypatch.setitem(sys.modules, "__main__", main)
    assert script_folder() == (str(script.parent), "train.py")
    main.__spec__ = types.SimpleNamespace(name="proj.train")  # python -m: no script folder
    assert script_folder() is None
    main.__spec__ = None
    main.__file__ = str(tmp_path / "bin" / "pytest")  # a console script is no project
    assert script_folder() is None


def test_a_git_folder_is_packed_as_git_lists_it(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "model.py").write_text("X = 1\n")
    (repo / "train.py").write_text("import pkg.model\n")
    (repo / "data.bin").write_bytes(b"x" * 100)
    (repo / "notes.txt").write_text("untracked, not ignored\n")
    (repo / ".gitignore").write_text("*.bin\n")
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo)]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "train.py", "pkg/model.py", ".gitignore"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    (repo / "pkg" / "model.py").write_text("X = 2\n")  # modified, not committed
    _, data = package_working_dir(str(repo))
    zf = zipfile.ZipFile(io.BytesIO(data))
    assert sorted(zf.namelist()) == [".gitignore", "notes.txt", "pkg/model.py", "train.py"]
    assert zf.read("pkg/model.py") == b"X = 2\n"  # what is on disk, not the commit
    _, sub = package_working_dir(str(repo / "pkg"))  # a subfolder: its files only
    assert zipfile.ZipFile(io.BytesIO(sub)).namelist() == ["model.py"]
    with pytest.raises(ConfigError, match="more than 2 files"):
        package_working_dir(str(repo), max_files=2)
