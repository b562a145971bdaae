"""Restart safety: SIGKILL the server mid-job, start it again, and nothing is lost."""

from __future__ import annotations

import os
import signal
import time

import pytest

from tests.integration.server.conftest import run_client, start_server, wait_state

pytestmark = pytest.mark.timeout(180)

CLIENT = """
import os, sys, tempfile, time
from tandem import train
from tandem.train import Checkpoint, DataParallelTrainer, RunConfig, ScalingConfig

def resumable(config):
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = int(open(os.path.join(d, "step")).read()) + 1
    for step in range(start, config["steps"]):
        time.sleep(config["sleep"])
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            train.report({"step": step, "started_at_step": start},
                         checkpoint=Checkpoint.from_directory(d))

def quick():
    train.report({"ok": 1})

store = sys.argv[1]
done = DataParallelTrainer(quick, run_config=RunConfig(storage_path=store, name="done")).fit(block=False)
done.wait(60)
long = DataParallelTrainer(resumable, train_loop_config={"steps": 12, "sleep": 0.4},
                           run_config=RunConfig(storage_path=store, name="long")).fit(block=False)
queued = DataParallelTrainer(quick, run_config=RunConfig(storage_path=store, name="queued")).fit(block=False)
print(done.job_id, long.job_id, queued.job_id)
"""


def test_sigkill_mid_job_then_restart_resumes_from_checkpoint(home, tmp_path):
    storage = str(tmp_path / "server")
    srv = start_server(home, storage, None, "--num-cpus", "1")
    try:
        out = run_client(srv, CLIENT, str(tmp_path), str(tmp_path / "results"))
        assert out.returncode == 0, out.stderr
        done, long, queued = out.stdout.split()
        with srv.http() as c:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                job = c.get(f"/api/jobs/{long}").json()
                if (job["result"] or {}).get("checkpoint_iteration", 0) >= 3:
                    break
                time.sleep(0.05)
            assert job["state"] == "RUNNING", job
            assert c.get(f"/api/jobs/{queued}").json()["state"] == "PENDING"
        srv.stop(signal.SIGKILL)
    finally:
        srv.stop()

    srv = start_server(home, storage, None, "--num-cpus", "1")
    try:
        finished = wait_state(srv, long, ("FINISHED", "FAILED"), 90)
        assert finished["state"] == "FINISHED", finished
        to = [t["to_state"] for t in finished["transitions"]]
        assert to[:3] == ["PENDING", "RUNNING", "PENDING"] and to[-1] == "FINISHED"
        assert "re-queued after a server restart" in finished["transitions"][2]["reason"]
        with srv.http() as c:
            rows = [r["metrics"] for r in c.get(f"/api/jobs/{long}/results").json()["results"]]
            seqs = [r["seq"] for r in c.get(f"/api/jobs/{long}/results").json()["results"]]
        assert seqs == list(range(len(seqs)))
        resumed = [r for r in rows if r["started_at_step"] > 0]
        assert resumed, rows
        assert resumed[0]["started_at_step"] >= 3  # from its checkpoint, not from the start
        assert rows[-1]["step"] == 11
        assert wait_state(srv, queued, ("FINISHED",), 60)["state"] == "FINISHED"
        assert wait_state(srv, done, ("FINISHED",), 5)["transitions"][-1]["to_state"] == "FINISHED"
    finally:
        srv.stop()
    assert not os.path.exists(os.path.join(home, ".tandem", "server.json"))  # removed on SIGTERM
