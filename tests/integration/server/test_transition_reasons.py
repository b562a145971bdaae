"""Every state transition a train server records says why (the dashboard's job view shows it)."""

from __future__ import annotations

import pytest

from tests.integration.server.conftest import cli, run_client, start_server, wait_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

CLIENT = """
import sys, time
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig

def long(config):
    for i in range(600):
        train.report({"i": i})
        time.sleep(0.1)

def bad(config):
    raise ValueError("bad learning rate 7\\nsecond line of the message")

def quick(config):
    train.report({"ok": 1})

store = sys.argv[1]
ids = []
for name, fn in (("by-cli", long), ("cancelled", quick), ("fails", bad), ("by-api", long),
                 ("done", quick)):
    ids.append(DataParallelTrainer(fn, run_config=RunConfig(storage_path=store, name=name))
               .fit(block=False).job_id)
print(" ".join(ids))
"""


def reasons(job: dict) -> list[tuple[str, str | None]]:
    return [(t["to_state"], t["reason"]) for t in job["transitions"]]


def test_stop_cancel_failure_and_finish_carry_their_reasons(home, tmp_path):
    srv = start_server(home, str(tmp_path / "server"), None, "--num-cpus", "1")
    try:
        out = run_client(srv, CLIENT, str(tmp_path), str(tmp_path / "results"))
        assert out.returncode == 0, out.stderr
        by_cli, cancelled, fails, by_api, done = out.stdout.split()
        wait_state(srv, by_cli, ("RUNNING",))
        with srv.http() as c:  # what the dashboard's Cancel button sends
            r = c.post(f"/api/jobs/{cancelled}/stop", params={"by": "dashboard"})
            assert r.status_code == 200, r.text
            assert c.post(f"/api/jobs/{fails}/stop", params={"by": "root"}).status_code == 422
        stopped = cli(srv, "jobs", "stop", by_cli)
        assert stopped.returncode == 0, stopped.stderr

        job = wait_state(srv, by_cli, ("STOPPED", "FAILED", "FINISHED"))
        assert reasons(job)[0] == ("PENDING", "submitted")
        assert reasons(job)[1][0] == "RUNNING" and "placed on the cluster" in reasons(job)[1][1]
        assert reasons(job)[-1] == ("STOPPED", "stopped with `tandem jobs stop`")

        job = wait_state(srv, cancelled, ("STOPPED", "FAILED", "FINISHED"))
        assert reasons(job) == [("PENDING", "submitted"),
                                ("STOPPED", "cancelled while pending from the dashboard")]

        job = wait_state(srv, fails, ("STOPPED", "FAILED", "FINISHED"))
        state, why = reasons(job)[-1]
        assert state == "FAILED" and why.startswith("failed: "), reasons(job)
        assert "bad learning rate 7" in why and "second line" not in why, why
        assert "second line" in job["error"]  # the whole error stays on the job

        wait_state(srv, by_api, ("RUNNING",))
        with srv.http() as c:
            assert c.post(f"/api/jobs/{by_api}/stop").status_code == 200
        job = wait_state(srv, by_api, ("STOPPED", "FAILED", "FINISHED"))
        assert reasons(job)[-1] == ("STOPPED", "stopped through the API")

        job = wait_state(srv, done, ("STOPPED", "FAILED", "FINISHED"))
        assert reasons(job)[-1] == ("FINISHED", "finished: the job's function returned")
    finally:
        srv.stop()
