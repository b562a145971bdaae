"""A real preemption seen in the dashboard (issue 24 items 3 and 6), in a real browser
(Debian's chromium driven by Playwright) against a real train server with
``--scheduling priority``: alice's low-priority run (a real worker process that checkpoints
when told to yield) is preempted by bob's higher-priority run that cannot fit beside it; the jobs
view and the job's page say so and why; when bob's run ends, alice's resumes from its
checkpoint, ``training_iteration`` goes on, and it finishes — the preemption was not a
failure (``FailureConfig(max_failures=0)``)."""

from __future__ import annotations

import pytest

from tests.helpers.preemption import LOOPS, PriorityServer, priority_server
from tests.integration.dashboard.test_browser import _browser, _console_guard, _poll, _shot
from tests.integration.dashboard.test_users_browser import _login
from tests.integration.server.conftest import run_client, wait_state

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

CLIENT = """
import sys
from tandem import train
from tandem.train import (Checkpoint, DataParallelTrainer, FailureConfig, RunConfig,
                          ScalingConfig, get_checkpoint, report)
""" + LOOPS + """
which, store, tmp, finish = sys.argv[1:5]
fn, priority = (low, 0) if which == "low" else (high, 5)
trainer = DataParallelTrainer(
    fn, train_loop_config={"tmp": tmp, "finish": finish},
    scaling_config=ScalingConfig(num_workers=1, resources_per_worker={"CPU": 2}),
    run_config=RunConfig(name=which, storage_path=store, priority=priority,
                         failure_config=FailureConfig(max_failures=0)))
print(trainer.fit(block=False).job_id)
"""


def test_a_preemption_and_the_resume_in_the_browser(tmp_path):
    with priority_server(tmp_path) as setup:
        _preemption_and_resume(setup)


def _preemption_and_resume(setup: PriorityServer) -> None:
    srv, tokens = setup.srv, setup.tokens
    low_done, high_done = setup.flag("low"), setup.flag("high")
    pw = browser = None
    try:
        def submit(who: str, which: str, finish: str) -> str:
            out = run_client(srv, CLIENT, setup.cwd, which, setup.store, setup.scratch,
                             finish, TANDEM_TOKEN=tokens[who])
            assert out.returncode == 0, out.stderr
            return out.stdout.split()[-1]

        low = submit("alice", "low", low_done)
        wait_state(srv, low, ("RUNNING",))
        _poll(lambda: len(setup.results(low)) >= 3, 60, "the low run's first iterations")
        high = submit("bob", "high", high_done)  # needs the whole cluster: low must yield
        preempted = setup.wait_reason(low, "RESTARTING", "preempted for")
        wait_state(srv, high, ("RUNNING",), 90)
        why = preempted["transitions"][-1]["reason"]
        assert f"preempted for {high} (priority 5 > 0" in why, why
        assert "checkpointed; waits to resume from checkpoint" in why, why
        before = setup.results(low)

        pw, browser = _browser()
        errors: list[str] = []
        page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
        _console_guard(page, errors)
        _login(page, srv.url, tokens["alice"])
        # the jobs view: alice's run waits, preempted, and says for whom; bob's runs
        low_row, high_row = f'tr[data-job="{low}"]', f'tr[data-job="{high}"]'
        _poll(lambda: "RESTARTING" in page.inner_text(low_row), 30, "low RESTARTING")
        _poll(lambda: "RUNNING" in page.inner_text(high_row), 30, "high RUNNING")
        text = page.inner_text(low_row)
        assert "alice" in text and f"preempted for {high}" in text, text
        assert "preempted 1×" in text and text.count(f"preempted for {high}") == 1, text
        assert "waits to resume from checkpoint" in text, text
        text = page.inner_text(high_row)
        assert "bob" in text and "5" in text.split(), text
        _shot(page, "preempted_jobs")
        # the cluster view: bob's run holds the cluster; alice's waits in the queue for
        # its next placement, saying it was preempted and what it needs
        page.goto(srv.url + "/#/cluster")
        page.wait_for_selector("#holders-table")
        row = page.locator("#holders-table tr", has_text="high")
        _poll(lambda: row.count() == 1 and "CPU 2" in row.inner_text(), 30, "high holds")
        assert "bob" in row.inner_text() and "RUNNING" in row.inner_text()
        _poll(lambda: "low" in page.inner_text("#queue-table"), 30, "low in the queue")
        queue = page.inner_text("#queue-table")
        assert "alice" in queue and f"preempted for {high}" in queue, queue
        assert "needs CPU 2 (free 0)" in queue, queue
        _shot(page, "preempted_cluster")
        # the low job's page: its transitions say it was preempted, with a checkpoint
        page.goto(f"{srv.url}/#/job/{low}")
        page.wait_for_selector("#transitions-table")
        _poll(lambda: "preempted for" in page.inner_text("#transitions-table"), 30,
              "the preemption in the job's transitions")
        assert "RESTARTING" in page.inner_text("#transitions-table")
        _shot(page, "preempted_job")

        open(high_done, "w").close()  # bob's run ends: alice's resumes where it was
        assert wait_state(srv, high, ("FINISHED", "FAILED", "STOPPED"), 90)["state"] == \
            "FINISHED"
        setup.wait_reason(low, "RUNNING", "resumed from checkpoint")
        _poll(lambda: len(setup.results(low)) >= len(before) + 2, 60,
              "the resumed run's iterations")
        open(low_done, "w").close()
        job = wait_state(srv, low, ("FINISHED", "FAILED", "STOPPED"), 90)
        assert job["state"] == "FINISHED" and not job.get("error"), job

        rows = setup.results(low)
        # training_iteration goes on across the preemption (no restart from 1), and so
        # does the loop's own step: it resumed from the checkpoint taken when told
        assert [r["training_iteration"] for r in rows] == list(range(1, len(rows) + 1))
        assert [r["step"] for r in rows] == list(range(len(rows)))
        k = next(i for i, r in enumerate(rows) if r["resumed_at"])  # the first resumed
        assert k >= 3 and all(r["resumed_at"] == k for r in rows[k:]), rows
        assert not any(r["resumed_at"] for r in rows[:k]), rows
        assert rows[k - 1]["told"], rows  # train.get_preemption_info() said so, in time

        page.goto(f"{srv.url}/#/job/{low}")
        page.wait_for_selector("#transitions-table")
        _poll(lambda: "FINISHED" in page.inner_text("#transitions-table"), 30, "FINISHED")
        trans = page.inner_text("#transitions-table")
        assert "resumed from checkpoint" in trans and "after preemption 1" in trans, trans
        assert "FAILED" not in trans, trans
        summary = page.inner_text("#job-summary")
        assert "FINISHED" in summary and "error" not in summary, summary
        _shot(page, "resumed_job")
        page.goto(srv.url + "/#/jobs")
        _poll(lambda: "FINISHED" in page.inner_text(low_row), 30, "low FINISHED in the list")
        assert "FAILED" not in page.inner_text(low_row)
        _shot(page, "resumed_jobs")
        assert not errors, errors
    finally:
        if browser is not None:
            browser.close()
        if pw is not None:
            pw.stop()
