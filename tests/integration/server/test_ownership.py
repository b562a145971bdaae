"""One owner per store: a second server refuses naming the first; server.json belongs to the
server that wrote it; `tandem server stop` finds a server whose server.json is damaged;
a damaged or lost store is refused at start; two live jobs never share a run folder."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.integration.server.conftest import (
    cli,
    free_port,
    run_client,
    start_server,
    wait_state,
)

pytestmark = pytest.mark.timeout(180)

CLIENT = """
import sys, time
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig

def loop(config):
    for step in range(config["steps"]):
        train.report({"step": step})
        time.sleep(config["sleep"])

h = DataParallelTrainer(loop, train_loop_config={"steps": int(sys.argv[1]),
                                                 "sleep": float(sys.argv[2])},
                        run_config=RunConfig(storage_path=sys.argv[3], name=sys.argv[4])
                        ).fit(block=False)
print(h.job_id)
"""


def _read(path: str, mode: str = "r"):  # type: ignore[no-untyped-def]
    with open(path, mode) as f:
        return f.read()


def _second_server(home: str, storage: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": home}
    env.pop("TANDEM_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tandem.server", "--port", str(free_port()),
                           "--storage", storage, "--num-cpus", "2", *extra], env=env,
                          capture_output=True, text=True, check=False, timeout=60)


def test_a_second_server_on_the_same_store_refuses_and_touches_nothing(home, tmp_path):
    storage = str(tmp_path / "server")
    srv = start_server(home, storage)
    try:
        out = run_client(srv, CLIENT, str(tmp_path), "25", "0.1", str(tmp_path / "runs"), "one")
        assert out.returncode == 0, out.stderr
        job_id = out.stdout.split()[-1]
        wait_state(srv, job_id, ("RUNNING",), 30)
        info_before = _read(os.path.join(home, ".tandem", "server.json"))

        second = _second_server(home, storage)
        assert second.returncode == 2, second.stderr
        assert f"pid {srv.proc.pid}" in second.stderr and srv.url in second.stderr
        assert "tandem server stop" in second.stderr
        # the first server's file and job are untouched: not re-queued, not run twice
        assert _read(os.path.join(home, ".tandem", "server.json")) == info_before
        job = wait_state(srv, job_id, ("FINISHED", "FAILED"), 60)
        assert job["state"] == "FINISHED"
        assert [t["to_state"] for t in job["transitions"]] == ["PENDING", "RUNNING", "FINISHED"]
        with srv.http() as c:
            rows = c.get(f"/api/jobs/{job_id}/results").json()["results"]
        assert [r["metrics"]["step"] for r in rows] == list(range(25))
        assert cli(srv, "server", "status").returncode == 0
    finally:
        srv.stop()


def test_a_second_server_on_the_same_postgres_store_refuses(home, tmp_path,
                                                            postgres_database_url):
    srv = start_server(home, str(tmp_path / "a"), None, "--db", postgres_database_url)
    try:
        second = _second_server(str(tmp_path), str(tmp_path / "b"), "--db", postgres_database_url)
        assert second.returncode == 2, second.stderr
        assert f"pid {srv.proc.pid}" in second.stderr and srv.url in second.stderr
        assert "advisory lock" in second.stderr
    finally:
        srv.stop()
    srv = start_server(str(tmp_path), str(tmp_path / "b"), None, "--db", postgres_database_url)
    srv.stop()  # the lock went with the first server


def test_server_only_removes_its_own_server_json(home, tmp_path):
    srv = start_server(home, str(tmp_path / "server"))
    path = os.path.join(home, ".tandem", "server.json")
    other = {"address": "http://127.0.0.1:1", "pid": 1, "token": "t"}
    with open(path, "w") as f:
        json.dump(other, f)
    srv.stop()
    assert json.loads(_read(path)) == other


def test_server_stop_works_with_a_damaged_server_json(home, tmp_path):
    storage = str(tmp_path / "server")
    srv = start_server(home, storage)
    try:
        with open(os.path.join(home, ".tandem", "server.json"), "w") as f:
            f.write("{garbage")
        listed = cli(srv, "jobs", "list", TANDEM_ADDRESS="")
        assert listed.returncode == 1 and "damaged" in listed.stderr, listed.stderr
        out = cli(srv, "server", "stop", "--storage", storage)
        assert out.returncode == 0, out.stdout + out.stderr
        assert f"pid {srv.proc.pid}" in out.stdout
        srv.proc.wait(30)
    finally:
        srv.stop()


def _history(home: str, storage: str, tmp_path) -> None:
    srv = start_server(home, storage)
    try:
        out = run_client(srv, CLIENT, str(tmp_path), "1", "0", str(tmp_path / "runs"), "h")
        wait_state(srv, out.stdout.split()[-1], ("FINISHED",), 60)
    finally:
        srv.stop()


@pytest.mark.parametrize("damage", ["truncated", "truncated-unmarked", "deleted", "header",
                                    "page"])
def test_a_damaged_or_lost_store_is_refused_at_start(home, tmp_path, damage):
    storage = str(tmp_path / "server")
    _history(home, storage, tmp_path)
    db = os.path.join(storage, "jobs.db")
    if damage.startswith("truncated"):
        if damage == "truncated-unmarked":  # a folder from before the history marker
            os.unlink(os.path.join(storage, "history.json"))
        open(db, "w").close()
    elif damage == "deleted":
        os.unlink(db)
    else:
        with open(db, "r+b") as f:
            size = f.seek(0, 2)
            f.seek(0 if damage == "header" else 4096)
            f.write(os.urandom(min(4096, size - (0 if damage == "header" else 4096))))
    before = _read(db, "rb") if os.path.exists(db) else None
    out = _second_server(home, storage)
    assert out.returncode == 2, out.stdout + out.stderr
    assert db in out.stderr, out.stderr
    what = {"truncated": "empty (0 bytes)", "truncated-unmarked": "empty (0 bytes)",
            "deleted": "missing", "header": "damaged", "page": "damaged"}[damage]
    assert what in out.stderr
    assert ("backup" in out.stderr) and "Traceback" not in out.stderr
    assert (_read(db, "rb") if os.path.exists(db) else None) == before  # untouched


def test_two_live_jobs_never_share_a_run_folder(home, tmp_path):
    srv = start_server(home, str(tmp_path / "server"))
    runs = str(tmp_path / "runs")
    try:
        first = run_client(srv, CLIENT, str(tmp_path), "30", "0.1", runs, "same")
        assert first.returncode == 0, first.stderr
        first_id = first.stdout.split()[-1]
        second = run_client(srv, CLIENT, str(tmp_path), "1", "0", runs, "same")
        assert second.returncode != 0
        assert first_id in second.stderr and "run folder" in second.stderr, second.stderr
        other = run_client(srv, CLIENT, str(tmp_path), "1", "0", runs, "other")
        assert other.returncode == 0, other.stderr
        wait_state(srv, first_id, ("FINISHED",), 60)  # its end is stored: the folder is free
        again = run_client(srv, CLIENT, str(tmp_path), "1", "0", runs, "same")
        assert again.returncode == 0, again.stderr
        logs = cli(srv, "jobs", "logs", first_id)
        assert logs.returncode == 0
    finally:
        srv.stop()
