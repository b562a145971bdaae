"""Issue 23 item 2: a PostgreSQL outage under a running job, with a second server started
during it and after it. Whoever owns the store, every job ends once (never
FINISHED -> FINISHED): the first server takes its lock back before the second can start;
and when the second does take the store (the first was frozen meanwhile), the first is
fenced: it writes nothing more and stops its copy of the job."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.conftest_postgres import start_postgres
from tests.integration.server.conftest import run_client, start_server, wait_state
from tests.integration.server.test_outage import CLIENT, _reports_seen, _wait_health

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def pg():
    server = start_postgres(durable_commits=True)
    try:
        yield server
    finally:
        server.stop()


# The jobs need no code of the client's folder: they send none (a script's folder is sent
# as working_dir by default, kept in the receiving server's storage, which the second
# server here does not share).
TAKEOVER_CLIENT = CLIENT.replace(
    "import sys, time\n",
    "import sys, time\nimport tandem\ntandem.init(runtime_env={'working_dir': None})\n", 1)


def _transitions(srv, job_id: str) -> list[tuple[str | None, str]]:
    with srv.http() as c:
        job = c.get(f"/api/jobs/{job_id}").json()
    return [(t["from_state"], t["to_state"]) for t in job["transitions"]]


def test_second_server_during_and_after_an_outage_never_runs_a_job_twice(home, tmp_path, pg):
    url = pg.url("postgres")
    home_b = str(tmp_path / "home_b")
    os.makedirs(home_b)
    a = start_server(home, str(tmp_path / "a"), None, "--db", url)
    b = None
    try:
        # 1. The outage; a second server started during it cannot open the store, and one
        #    started after it finds the first one holding its lock again.
        out = run_client(a, TAKEOVER_CLIENT, str(tmp_path), "30", "0.1", str(tmp_path / "runs1"))
        assert out.returncode == 0, out.stderr
        job1 = out.stdout.split()[-1]
        _reports_seen(a, job1, 3)
        pg.crash()
        _wait_health(a, 503, 30)
        with pytest.raises(RuntimeError, match="cannot open the job store"):
            start_server(home_b, str(tmp_path / "b"), None, "--db", url, timeout_s=60)
        pg.start_again()
        _wait_health(a, 200, 60)
        with pytest.raises(RuntimeError, match="is in use by the tandem server pid "
                                               f"{a.proc.pid}"):
            start_server(home_b, str(tmp_path / "b"), None, "--db", url, timeout_s=60)
        wait_state(a, job1, ("FINISHED", "FAILED"), 90)
        assert _transitions(a, job1) == [(None, "PENDING"), ("PENDING", "RUNNING"),
                                         ("RUNNING", "FINISHED")]

        # 2. The outage again, and the first server frozen through it: the second one
        #    takes the store after it and re-runs the job; the first, thawed, is fenced.
        out = run_client(a, TAKEOVER_CLIENT, str(tmp_path), "40", "0.1", str(tmp_path / "runs2"))
        assert out.returncode == 0, out.stderr
        job2 = out.stdout.split()[-1]
        _reports_seen(a, job2, 3)
        pg.crash()
        _wait_health(a, 503, 30)
        a.proc.send_signal(signal.SIGSTOP)
        try:
            pg.start_again()
            b = start_server(home_b, str(tmp_path / "b"), None, "--db", url)
        finally:
            a.proc.send_signal(signal.SIGCONT)
        health = _wait_health(a, 503, 30)
        deadline = time.monotonic() + 30
        while "another server took" not in health["reason"]:
            assert time.monotonic() < deadline, health
            time.sleep(0.2)
            health = _wait_health(a, 503, 30)
        wait_state(b, job2, ("FINISHED", "FAILED"), 120)
        moves = _transitions(b, job2)
        ends = [m for m in moves if m[1] in ("FINISHED", "FAILED", "STOPPED")]
        assert ends == [("RUNNING", "FINISHED")], moves
        assert moves[-1] == ("RUNNING", "FINISHED")
        assert ("PENDING", "RUNNING") in moves and moves[0] == (None, "PENDING")
        with a.http() as c:  # the first server starts nothing and runs nothing any more
            assert c.get("/api/cluster").json()["num_running"] == 0
        time.sleep(0)  # (nothing to wait for: the checks above read the store)
        assert _transitions(b, job2) == moves  # the fenced server wrote nothing after
        assert "writes nothing more" in a.log_text()
    finally:
        a.stop()
        if b is not None:
            b.stop()
