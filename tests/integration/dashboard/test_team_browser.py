"""The dashboard's team views (issue 24 item 6) in a real browser (Debian's chromium driven
by Playwright) against a real train server: groups set with the CLI, a job held by its
group's quota with the reason in the jobs and cluster views, the group's quota in use, and
the audit page (admins only) filtered by user."""

from __future__ import annotations

import os

import pytest

from tests.integration.dashboard.test_browser import _browser, _console_guard, _poll, _shot
from tests.integration.dashboard.test_users_browser import _login, _submit
from tests.integration.server.conftest import cli, start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

WAITS = "waits: group ml's quota CPU 0.5/0.5 (this job needs 0.5 more)"


def test_groups_quota_waits_and_the_audit_page_in_the_browser(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    srv = start_server(home, str(tmp_path / "storage"), None, "--scheduling", "fair")
    try:
        tokens = {}
        for name in ("alice", "bob"):
            out = cli(srv, "users", "add", name, "--group", "ml")
            assert out.returncode == 0 and f"user {name} (member, group ml) added" in out.stdout
            tokens[name] = out.stdout.strip().splitlines()[-1]
        out = cli(srv, "users", "add", "carol")
        assert out.returncode == 0, out.stderr
        out = cli(srv, "users", "set-role", "carol", "viewer")
        assert out.returncode == 0 and "carol: member -> viewer" in out.stdout, out.stderr
        out = cli(srv, "quotas", "set", "--group", "ml", "--cpus", "0.5")
        assert out.returncode == 0 and "group ml (alice, bob): cpus=0.5" in out.stdout, out
        out = cli(srv, "quotas", "set", "--group", "ml", "--cpus", "1", "--token",
                  tokens["alice"])
        assert out.returncode == 1 and "quotas.set is for admins" in out.stderr, out.stderr
        first = _submit(srv, tokens["alice"], "alice_job")
        with srv.http() as c:
            _poll(lambda: c.get(f"/api/jobs/{first}").json()["state"] == "RUNNING", 60,
                  "alice's job runs")
        held = _submit(srv, tokens["bob"], "bob_job")

        pw, browser = _browser()
        errors: list[str] = []
        try:
            page = browser.new_context(viewport={"width": 1400, "height": 900}).new_page()
            _console_guard(page, errors)
            # bob sees why his job waits, in the jobs list and in the cluster view
            _login(page, srv.url, tokens["bob"])
            assert page.locator("#nav-audit").is_hidden()  # the audit log is for admins
            _poll(lambda: WAITS in page.inner_text(f'tr[data-job="{held}"]'), 30,
                  "the wait reason in the jobs list")
            assert "Why / error" in page.inner_text("#jobs thead")
            _shot(page, "team_jobs")
            page.goto(srv.url + "/#/cluster")
            page.wait_for_selector("#groups-table")
            _poll(lambda: WAITS in page.inner_text("#queue-table"), 30, "the queue's reason")
            groups = page.inner_text("#groups-table")
            assert "ml" in groups and "alice, bob" in groups and "CPU 0.5" in groups
            assert "cpus 0.5" in groups  # the group's quota beside what it holds
            _shot(page, "team_cluster")
            page.click("#logout button")
            page.wait_for_url("**/login")

            # the admin's audit page: everyone's writes, then only bob's
            _login(page, srv.url, srv.token)
            page.click("#nav-audit")
            page.wait_for_selector("#audit-table")
            log = page.inner_text("#audit-table")
            for what in ("users.set_role", "member -> viewer", "quotas.set", "group ml",
                         "users.add", "jobs.submit", "denied (403)"):
                assert what in log, (what, log)
            page.wait_for_selector('#audit-user option[value="bob"]', state="attached")
            page.select_option("#audit-user", "bob")
            page.click("#audit-filters button[type=submit]")
            _poll(lambda: "user=bob" in page.url and "alice" not in page.inner_text(
                "#audit-table"), 30, "the log filtered to bob")
            rows = page.locator("#audit-table tbody tr")
            assert rows.count() == 1 and "jobs.submit" in rows.first.inner_text()
            _shot(page, "team_audit")
            assert not errors, errors
        finally:
            browser.close()
            pw.stop()
        with srv.http() as c:
            for job in (first, held):
                c.post(f"/api/jobs/{job}/stop")
    finally:
        srv.stop()
