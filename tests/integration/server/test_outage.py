"""A real PostgreSQL stopped and started again under a running job: nothing acknowledged is
lost, the job's end is recorded once, the API says 503 (never 500) meanwhile, and a server
that dies during the outage leaves a journal the next one replays instead of re-running."""

from __future__ import annotations

import json
import signal
import time

import httpx
import pytest

from tests.conftest_postgres import start_postgres
from tests.integration.server.conftest import run_client, start_server, wait_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

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
                        run_config=RunConfig(storage_path=sys.argv[3], name="outage")
                        ).fit(block=False)
print(h.job_id)
"""


@pytest.fixture
def pg():
    server = start_postgres(durable_commits=True)  # an acknowledged commit survives a crash
    try:
        yield server
    finally:
        server.stop()


def _reports_seen(srv, job_id: str, at_least: int, timeout_s: float = 60) -> None:
    """Waits on the live event stream (served from memory) for reports."""
    seen = 0
    deadline = time.monotonic() + timeout_s
    with srv.http() as c, c.stream("GET", f"/api/jobs/{job_id}/events") as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                data = json.loads(line[5:])
                seen += len(data.get("rows") or [])
                if seen >= at_least:
                    return
            assert time.monotonic() < deadline, "no reports"


def _wait_end_from_stream(srv, job_id: str, timeout_s: float = 90) -> dict:
    with srv.http() as c, c.stream("GET", f"/api/jobs/{job_id}/events",
                                   timeout=timeout_s) as r:
        event = None
        for line in r.iter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "end":
                return json.loads(line[5:])
    raise AssertionError("the stream ended without an end event")


def _stored(srv, job_id: str) -> tuple[dict, list[dict]]:
    with srv.http() as c:
        job = c.get(f"/api/jobs/{job_id}").json()
        rows = c.get(f"/api/jobs/{job_id}/results", params={"limit": 1000}).json()["results"]
    return job, rows


def _wait_health(srv, code: int, timeout_s: float = 60) -> dict:
    deadline = time.monotonic() + timeout_s
    with srv.http() as c:
        while True:
            r = c.get("/api/health")
            if r.status_code == code:
                return r.json()
            assert time.monotonic() < deadline, (r.status_code, r.text)
            time.sleep(0.1)


def test_postgres_outage_mid_job_loses_no_report(home, tmp_path, pg):
    url = pg.url("postgres")
    srv = start_server(home, str(tmp_path / "server"), None, "--db", url)
    try:
        out = run_client(srv, CLIENT, str(tmp_path), "30", "0.15", str(tmp_path / "runs"))
        assert out.returncode == 0, out.stderr
        job_id = out.stdout.split()[-1]
        _reports_seen(srv, job_id, 5)
        pg.crash()
        down = _wait_health(srv, 503, 30)
        assert "unreachable" in down["reason"] and down["status"] == "store_unavailable"
        with srv.http() as c:
            r = c.get("/api/jobs")
            assert r.status_code == 503, r.text
            assert "unreachable" in r.json()["detail"] and "try again" in r.json()["detail"]
            assert c.get(f"/api/jobs/{job_id}").status_code == 503
        until = time.monotonic() + 5  # the outage lasts 5 s, as in the issue; health says so
        with srv.http() as c:
            while time.monotonic() < until:
                assert c.get("/api/health").status_code == 503
                time.sleep(0.2)
        pg.start_again()
        _wait_health(srv, 200, 60)
        wait_state(srv, job_id, ("FINISHED", "FAILED"), 90)
        job, rows = _stored(srv, job_id)
        assert job["state"] == "FINISHED", job
        assert [r["metrics"]["step"] for r in rows] == list(range(30))
        assert [r["seq"] for r in rows] == list(range(30))
        to = [t["to_state"] for t in job["transitions"]]
        assert to == ["PENDING", "RUNNING", "FINISHED"], to
        assert job["result"]["metrics"]["step"] == 29
    finally:
        srv.stop()
    assert "Traceback" not in srv.log_text().split("the job store answers again")[-1]


def test_outage_over_the_jobs_end_and_a_server_crash_runs_nothing_twice(home, tmp_path, pg):
    url = pg.url("postgres")
    storage = str(tmp_path / "server")
    srv = start_server(home, storage, None, "--db", url)
    try:
        out = run_client(srv, CLIENT, str(tmp_path), "12", "0.1", str(tmp_path / "runs"))
        assert out.returncode == 0, out.stderr
        job_id = out.stdout.split()[-1]
        _reports_seen(srv, job_id, 3)
        pg.crash()
        end = _wait_end_from_stream(srv, job_id)  # the job ends while the store is down
        assert end["state"] == "FINISHED"
        health = _wait_health(srv, 503, 10)
        assert health["store_backlog"] > 0
        srv.stop(signal.SIGKILL)  # what was not stored is in the journal
    finally:
        srv.stop()
    pg.start_again()
    srv = start_server(home, storage, None, "--db", url)
    try:
        job, rows = _stored(srv, job_id)
        assert job["state"] == "FINISHED", job
        to = [t["to_state"] for t in job["transitions"]]
        assert to == ["PENDING", "RUNNING", "FINISHED"], to  # not re-queued, not re-run
        assert [r["metrics"]["step"] for r in rows] == list(range(12))
        with srv.http() as c:
            assert c.get("/api/health").status_code == 200
            assert c.get("/api/cluster").json()["num_running"] == 0
        assert "replayed" in srv.log_text()
    finally:
        srv.stop()


def test_submit_during_an_outage_is_refused_with_503_and_recorded_nowhere(home, tmp_path, pg):
    srv = start_server(home, str(tmp_path / "server"), None, "--db", pg.url("postgres"))
    try:
        pg.crash()
        out = run_client(srv, CLIENT, str(tmp_path), "1", "0", str(tmp_path / "runs"))
        assert out.returncode != 0
        assert "unreachable" in out.stderr, out.stderr
        pg.start_again()
        _wait_health(srv, 200, 30)
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {srv.token}"}) as c:
            assert c.get("/api/jobs").json()["jobs"] == []
            assert c.get("/api/cluster").json()["num_pending"] == 0
    finally:
        srv.stop()
