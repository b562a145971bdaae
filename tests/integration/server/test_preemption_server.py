"""Issue 24 item 3 on a train server (``--scheduling priority``): a Tune experiment's trial,
run by a client's ``Tuner`` (its trials are the server's jobs), is preempted by another
user's higher-priority run, checkpoints, waits, resumes from its checkpoint with
``training_iteration`` going on, and the experiment ends without an error."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from tests.helpers.preemption import LOOPS, priority_server
from tests.integration.server.conftest import run_client, wait_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

TUNER = """
import json, sys
import tandem
from tandem import train, tune
from tandem.train import Checkpoint, RunConfig
from tandem.tune import get_checkpoint, report
""" + LOOPS + """
tandem.init(address=os.environ["TANDEM_ADDRESS"])
store, tmp, finish = sys.argv[1:4]
grid = tune.Tuner(tune.with_resources(low, {"CPU": 2}),
                  param_space={"tmp": tmp, "finish": finish},
                  run_config=RunConfig(name="exp", storage_path=store, verbose=0)).fit()
df = grid[0].metrics_dataframe
print("RESULT " + json.dumps({
    "errors": grid.num_errors, "iterations": [int(x) for x in df["training_iteration"]],
    "steps": [int(x) for x in df["step"]], "resumed_at": [int(x) for x in df["resumed_at"]],
    "told": [bool(x) for x in df["told"]]}))
"""

HIGH = """
import sys
from tandem import train
from tandem.train import (Checkpoint, DataParallelTrainer, RunConfig, ScalingConfig,
                          get_checkpoint, report)
""" + LOOPS + """
store, finish = sys.argv[1:3]
print(DataParallelTrainer(high, train_loop_config={"finish": finish},
                          scaling_config=ScalingConfig(num_workers=1,
                                                       resources_per_worker={"CPU": 2}),
                          run_config=RunConfig(name="high", storage_path=store, priority=5))
      .fit(block=False).job_id)
"""


def test_a_tune_trial_on_a_server_is_preempted_and_resumes(tmp_path):
    tuner = None
    with priority_server(tmp_path) as setup:
        srv = setup.srv
        trial_done, high_done = setup.flag("trial"), setup.flag("high")
        try:
            script = tmp_path / "tuner.py"
            script.write_text(textwrap.dedent(TUNER))
            tuner = subprocess.Popen(
                [sys.executable, str(script), setup.store, setup.scratch, trial_done],
                cwd=str(tmp_path), env=srv.env(TANDEM_TOKEN=setup.tokens["alice"]),
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

            with srv.http() as c:
                def trial_job() -> dict | None:
                    jobs = c.get("/api/jobs").json()["jobs"]
                    return next((j for j in jobs if j["state"] == "RUNNING"), None)

                job = _poll(trial_job, "alice's trial runs", tuner)
            trial = job["job_id"]
            _poll(lambda: len(setup.results(trial)) >= 3, "the trial's first iterations",
                  tuner)
            out = run_client(srv, HIGH, str(tmp_path), setup.store, high_done,
                             TANDEM_TOKEN=setup.tokens["bob"])
            assert out.returncode == 0, out.stderr
            high = out.stdout.split()[-1]
            preempted = setup.wait_reason(trial, "RESTARTING", "preempted for")
            assert preempted["state"] == "RESTARTING" and preempted["owner"] == "alice"
            assert f"preempted for {high} (priority 5 > 0)" in \
                preempted["transitions"][-1]["reason"]
            wait_state(srv, high, ("RUNNING",), 90)
            open(high_done, "w").close()
            setup.wait_reason(trial, "RUNNING", "resumed from checkpoint")
            n = len(setup.results(trial))
            _poll(lambda: len(setup.results(trial)) >= n + 2,
                  "the resumed trial's iterations", tuner)
            open(trial_done, "w").close()
            stdout, stderr = tuner.communicate(timeout=120)
            assert tuner.returncode == 0, stderr[-3000:]
            result = json.loads(next(line for line in stdout.splitlines()
                                     if line.startswith("RESULT "))[len("RESULT "):])
            k = len(result["iterations"])
            assert result["errors"] == 0  # the preemption was not a failure
            assert result["iterations"] == list(range(1, k + 1))  # no restart from 1
            assert result["steps"] == list(range(k))  # resumed from the checkpoint
            first_after = result["resumed_at"].index(max(result["resumed_at"]))
            assert first_after >= 3 and result["told"][first_after - 1], result
            assert set(result["resumed_at"][first_after:]) == {first_after}, result
            # a trial's job ends in Tune's words: TERMINATED (ERROR had it failed)
            assert wait_state(srv, trial, ("TERMINATED", "ERROR"), 30)["state"] == \
                "TERMINATED"
        finally:
            if tuner is not None and tuner.poll() is None:
                for flag in (trial_done, high_done):
                    open(flag, "w").close()
                tuner.kill()
                tuner.communicate()


def _poll(fn, what: str, proc: subprocess.Popen, timeout_s: float = 90):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        if proc.poll() is not None:
            raise AssertionError(f"the tuner ended while waiting for {what}: "
                                 f"{proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")
