"""The dashboard's script is ES modules (no build step): in a real browser, every page of a
real train server loads them as JavaScript, with no console error, each page drawn by its
own module. Screenshots go to tests/artifacts/."""

from __future__ import annotations

import os
from importlib import resources

import pytest

from tests.integration.dashboard.test_browser import (
    _browser,
    _console_guard,
    _poll,
    _put_version,
    _shot,
    srv,  # noqa: F401 - the fixture
)
from tests.integration.server.conftest import run_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]

STATIC = str(resources.files("tandem.server.dashboard") / "static")

SWEEP = """
import sys
from tandem import tune

def trainable(config):
    for i in range(1, 3):
        tune.report({"loss": config["lr"] / i})

grid = tune.Tuner(
    trainable, param_space={"lr": tune.grid_search([0.1, 0.2])},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=tune.RunConfig(name="mods", storage_path=sys.argv[1], verbose=0),
).fit()
print("errors", grid.num_errors)
"""


def test_every_page_loads_its_modules_without_errors(srv, tmp_path):  # noqa: F811
    out = run_client(srv, SWEEP, str(tmp_path), str(tmp_path / "results"), timeout=150)
    assert out.returncode == 0 and "errors 0" in out.stdout, out.stderr + out.stdout
    _put_version(srv, "digits", {"config": {"hidden": 16}, "metrics": {"accuracy": 0.9}})
    pw, browser = _browser()
    errors: list[str] = []
    scripts: dict[str, str] = {}
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        _console_guard(page, errors)

        def seen(r) -> None:
            if "/dashboard/static/" in r.url and r.url.endswith(".js"):
                scripts[r.url.rsplit("/", 1)[1]] = f"{r.status} {r.headers.get('content-type')}"
        page.on("response", seen)
        page.goto(srv.url + "/login")
        page.fill("#token", srv.token)
        page.click("button[type=submit]")
        page.wait_for_selector("#jobs tbody tr[data-job]")
        job_id = page.get_attribute("#jobs tbody tr[data-job]", "data-job")

        # each page through the router (the address changes, the page is not reloaded)
        page.evaluate("window.__noReload = 1")
        pages = [("cluster", "#nodes-table", "Cluster"), ("experiments", "#runs-table", "Experiments"),
                 ("models", "#versions-digits", "Models"), ("audit", "#audit-table", "Audit log"),
                 (f"job/{job_id}", "#transitions-table", None), ("jobs", "#jobs", "Jobs")]
        for address, selector, heading in pages:
            page.evaluate(f"location.hash = '#/{address}'")
            page.wait_for_selector(selector)
            if heading:
                assert page.inner_text("#main h1") == heading, address
            _shot(page, "modules_" + address.split("/")[0])
        page.click('#nav a[data-view="experiments"]')
        page.click("#experiments-table a")
        page.wait_for_selector("#trials-table tbody tr a")
        assert page.locator("#trials-table tbody tr").count() == 2
        page.wait_for_selector("#parallel-coordinates path.l", state="attached")
        _shot(page, "modules_experiment")
        page.click("#trials-table tbody tr a")
        page.wait_for_selector("#metric-chart canvas")
        _shot(page, "modules_run")
        page.evaluate("location.hash = '#/nowhere'")
        _poll(lambda: page.inner_text("#main") == "No such page.", 10, "the unknown page")
        assert page.evaluate("window.__noReload") == 1
        assert page.evaluate("typeof window.tandemUI + typeof window.tandemTeam") == (
            "undefinedundefined")  # nothing hung on window: modules import each other
        assert not errors, errors

        # every script the package ships was loaded (login.js by the login page), each as
        # JavaScript: a module script served as anything else does not run
        shipped = {f for f in os.listdir(STATIC) if f.endswith(".js")}
        assert set(scripts) == shipped, (sorted(scripts), sorted(shipped))
        for name, how in scripts.items():
            assert how.startswith("200 text/javascript"), (name, how)
    finally:
        browser.close()
        pw.stop()
