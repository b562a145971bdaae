"""The server's job store: PostgreSQL for real, and SQLite read by other processes at once."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tandem.jobs.store import open_store
from tests.integration.server.conftest import run_client, start_server, wait_state

pytestmark = pytest.mark.timeout(180)

SUBMIT = """
import sys
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig

def loop(config):
    for i in range(config["n"]):
        train.report({"i": i})

h = DataParallelTrainer(loop, train_loop_config={"n": int(sys.argv[2])},
                        run_config=RunConfig(storage_path=sys.argv[1])).fit(block=False)
print(h.job_id)
"""


@pytest.mark.postgres
def test_server_on_postgresql(home, tmp_path, postgres_database_url):
    srv = start_server(home, str(tmp_path / "server"), None, "--db", postgres_database_url)
    try:
        with srv.http() as c:
            assert "postgresql" in c.get("/api/health").json()["store"]
        out = run_client(srv, SUBMIT, str(tmp_path), str(tmp_path / "res"), "50")
        assert out.returncode == 0, out.stderr
        job_id = out.stdout.split()[-1]
        assert wait_state(srv, job_id, ("FINISHED",))["state"] == "FINISHED"
    finally:
        srv.stop()
    with open_store(postgres_database_url) as store:
        rec = store.get_job(job_id)
        assert rec is not None and rec.state == "FINISHED" and rec.spec  # the pickled spec
        assert [t.to_state for t in store.transitions(job_id)] == ["PENDING", "RUNNING", "FINISHED"]
        assert [r.metrics["i"] for r in store.get_reports(job_id)] == list(range(50))
        assert rec.result["path"].startswith(str(tmp_path / "res"))


READER = """
import sys, time
from tandem.jobs.store import open_store
store = open_store(sys.argv[1])
n = 0
deadline = time.monotonic() + float(sys.argv[2])
while time.monotonic() < deadline:
    jobs = store.list_jobs(limit=50)
    for j in jobs[:3]:
        store.get_job(j.job_id)
        store.get_reports(j.job_id, after_seq=-1, limit=500)
    n += 1
print("reads", n)
"""


def test_sqlite_server_writes_while_readers_read(server, tmp_path):
    db = f"{server.storage}/jobs.db"
    readers = [subprocess.Popen([sys.executable, "-c", READER, db, "4"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        ids = []
        for _ in range(2):
            out = run_client(server, SUBMIT, str(tmp_path), str(tmp_path / "res"), "20000")
            assert out.returncode == 0, out.stderr
            ids.append(out.stdout.split()[-1])
        cli_out = [subprocess.run([sys.executable, "-m", "tandem.cli", "jobs", "list"],
                                  env=server.env(), capture_output=True, text=True, timeout=60)
                   for _ in range(3)]
        for job_id in ids:
            assert wait_state(server, job_id, ("FINISHED",), 120)["state"] == "FINISHED"
    finally:
        results = [r.communicate(timeout=60) for r in readers]
    for (stdout, stderr), r in zip(results, readers):
        assert r.returncode == 0 and "locked" not in stderr, stderr
        assert int(stdout.split()[1]) > 10
    for o in cli_out:
        assert o.returncode == 0 and "locked" not in o.stderr, o.stderr
    with server.http() as c:
        for job_id in ids:
            res = c.get(f"/api/jobs/{job_id}/results", params={"after_seq": 19_990}).json()
            assert [r["metrics"]["i"] for r in res["results"]] == list(range(19_991, 20_000))
    assert "locked" not in server.log_text()
