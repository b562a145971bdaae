"""The train server and the CLI as a user drives them: ``tandem server start/status/stop``,
``tandem submit``, ``tandem jobs list/show/logs/stop``, and a job followed by id from
another process (``tandem.jobs.get(job_id).results()``)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import SCRIPTS, line, start_server, stop_server

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


def test_server_start_status_stop(user):
    srv = start_server(user)
    try:
        status = user.cli("server", "status").stdout
        assert f"at http://{srv.address} (pid {srv.pid})" in status
        assert "resources: CPU=2" in status
        link = user.cli("dashboard").stdout.strip()  # docs/server.md: prints the URL
        token = json.loads((Path(user.home) / ".tandem" / "server.json").read_text())["token"]
        assert link == f"http://{srv.address}/login#token={token}"  # token in the fragment only
        assert user.cli("version").stdout.strip()
    finally:
        stop_server(srv)
    after = user.cli("server", "status", ok=False)
    assert after.returncode == 1 and "no tandem server is running" in after.stdout


def _job_line(srv, job_id: str) -> str:
    out = srv.user.cli("jobs", "list", env=srv.env()).stdout
    rows = [r for r in out.splitlines() if job_id in r]
    assert len(rows) == 1, out
    return rows[0]


def _wait_state(srv, job_id: str, state: str, timeout_s: float = 60) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        row = _job_line(srv, job_id)
        if state in row.split():
            return row
        assert time.monotonic() < deadline, f"{job_id} never reached {state}: {row}"
        time.sleep(0.2)


def test_submit_then_jobs_list_show_logs(server):
    user = server.user
    proc = user.cli("submit", os.path.join(os.path.dirname(__file__), "scripts",
                                           "submitted_train.py"), "0.5", env=server.env())
    job_id = line(proc.stdout, "submitted")
    assert "RESULT loss=0.167" in proc.stdout  # the script's own output, fit() blocked
    row = _job_line(server, job_id)
    assert "FINISHED" in row.split() and "submitted" in row  # id, state and name on one line
    show = user.cli("jobs", "show", job_id, env=server.env()).stdout
    assert "FINISHED" in show and '"loss": 0.16' in show and "RUNNING -> FINISHED" in show
    logs = user.cli("jobs", "logs", job_id, env=server.env()).stdout
    assert "rank 0 trains with lr=0.5" in logs and "rank 1 trains with lr=0.5" in logs


def test_jobs_stop_stops_a_job_the_script_left_running(server):
    out = server.user.python("submit_forever.py", env=server.env())
    job_id = line(out, "JOB_ID")  # the script has exited; its job runs on
    _wait_state(server, job_id, "RUNNING")
    stop = server.user.cli("jobs", "stop", job_id, env=server.env()).stdout
    assert job_id in stop and "stop requested" in stop
    _wait_state(server, job_id, "STOPPED")


def test_job_results_followed_from_another_process(server, tmp_path):
    """One process submits and exits; another gets the job by id and iterates its
    results while it runs (crashed with AttributeError: 'RemoteJob' object has no
    attribute 'reports_dropped')."""
    flag = str(tmp_path / "followed")
    job_id = line(server.user.python("server_submit.py", flag, env=server.env()), "JOB_ID")
    out = server.user.python("server_follow.py", job_id, flag, env=server.env())
    assert line(out, "STATUS_WHILE_RUNNING") == "RUNNING"
    assert line(out, "STEPS") == "[0, 1, 2, 3, 4]"
    assert line(out, "FINAL") == "FINISHED 4 0.25"
    assert "FINISHED" in _job_line(server, job_id).split()


def test_working_dir_upload_and_tuner_on_the_server(server, tmp_path):
    """docs/server.md: code importing the user's own module runs on the server once the
    folder is sent with runtime_env={"working_dir": "."}; a Tuner submits there too."""
    project = tmp_path / "project"
    shutil.copytree(os.path.join(SCRIPTS, "project"), project)
    out = server.user.python(str(project / "train_with_helpers.py"), env=server.env(),
                             cwd=str(project))
    assert line(out, "LRS") == "[0.5, 0.25, 0.167] True"  # ran in the uploaded folder
    assert line(out, "TUNE") == "0 4"
    assert "FINISHED" in _job_line(server, line(out, "JOB_ID")).split()
    listed = server.user.cli("jobs", "list", env=server.env()).stdout.splitlines()
    trials = [r for r in listed if "objective_" in r]  # every trial is a job on the server
    # a trial job shows Ray's word for a finished trial
    assert len(trials) == 3 and all("TERMINATED" in r.split() for r in trials), listed


def test_tuner_on_a_server_decides_at_the_result(server, tmp_path):
    """Issue 17: on a train server too, a trial stopped at iteration k leaves exactly k
    rows: its worker waits for the tuner's verdict, which the client sends back through
    the server (it overshot to hundreds of rows: reports never waited there). Issue 25:
    only at the reports where the stopper or scheduler can decide."""
    out = server.user.python("tuner_on_server.py", str(tmp_path / "results"),
                             env=server.env())
    assert line(out, "STOP_ROWS") == "[8, 8]"
    assert line(out, "STOP_LAST") == "[7, 7]"
    assert line(out, "STOP_FRAME") == "[8, 8]"
    assert line(out, "SCHED_ROWS") == "[1, 2, 3, 4, 5]"
    assert line(out, "ERRORS") == "0"
    # Issue 25: only the reports that can change the outcome wait for a verdict (counted by
    # the client's tuner). The stop criterion can fire only at iteration 8: at most one
    # question per trial (the last may not arrive: its gang is being stopped), not 16.
    assert int(line(out, "STOP_QUESTIONS")) <= 2
    # a custom scheduler may decide at any result: each report before the stop asks
    assert int(line(out, "SCHED_QUESTIONS")) >= 4
    # ASHA decides where a trial reaches a rung (1, 3, max_t 9): the same stops as before,
    # with questions at those reports only (at most 7 of the 19; at least the 4 at rungs 1
    # and 3 of the two trials that go on)
    assert line(out, "ASHA_ROWS") == "[9, 1, 9]"
    assert 4 <= int(line(out, "ASHA_QUESTIONS")) <= 7


def test_trial_local_stoppers_decide_next_to_the_trial(server, tmp_path):
    """Issue 25: a custom stopper declared ``trial_local`` and ``TrialPlateauStopper`` run
    in the trial's worker on the server: each trial stops at the same iteration as
    embedded, with every result recorded in order, and only the result where the stopper
    fires waits for the verdict (at most one question per trial, not one per report)."""
    script = "tuner_local_stopper.py"
    remote = server.user.python(script, str(tmp_path / "remote"), env=server.env())
    local = server.user.python(script, str(tmp_path / "local"))
    for name, rows, last in (("CUSTOM", "[9, 9]", "[8, 8]"), ("PLATEAU", "[13, 13]", "[12, 12]")):
        for out in (remote, local):
            assert line(out, f"{name}_ROWS") == rows, out
            assert line(out, f"{name}_LAST") == last, out
            assert line(out, f"{name}_IN_ORDER") == "True", out
            assert line(out, f"{name}_ERRORS") == "0", out
            assert int(line(out, f"{name}_QUESTIONS")) <= 2, out  # one per trial at most
