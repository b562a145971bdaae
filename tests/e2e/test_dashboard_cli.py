"""`tandem dashboard` as a user runs it: over results on disk (no server), then the login
link of a running server. Subprocesses and HTTP only (the browser test is
tests/integration/dashboard/test_browser.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import httpx
import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

SWEEP = textwrap.dedent("""
    import sys
    from tandem import tune

    def trainable(config):
        for i in range(1, 5):
            tune.report({"score": config["x"] * i})

    tune.Tuner(trainable, param_space={"x": tune.grid_search([1, 2, 3])},
               tune_config=tune.TuneConfig(metric="score", mode="max"),
               run_config=tune.RunConfig(name="xs", storage_path=sys.argv[1], verbose=0)).fit()
""")


def test_tandem_dashboard_over_results_on_disk(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path)}
    env.pop("TANDEM_ADDRESS", None)
    results = tmp_path / "results"
    script = tmp_path / "sweep.py"
    script.write_text(SWEEP)
    subprocess.run([sys.executable, str(script), str(results)], env=env, check=True,
                   capture_output=True, timeout=120)
    bad = subprocess.run([sys.executable, "-m", "tandem.cli", "dashboard", str(tmp_path / "no")],
                         env=env, capture_output=True, text=True, timeout=60, check=False)
    assert bad.returncode == 1 and "is not a folder" in bad.stderr
    proc = subprocess.Popen([sys.executable, "-m", "tandem.cli", "dashboard", str(results)],
                            env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith(f"tandem dashboard over {results}")
        link = proc.stdout.readline().strip()
        base, token = link.split("/login#token=")
        with httpx.Client(base_url=base) as c:
            assert c.get("/api/dashboard/experiments").status_code == 401
            r = c.post("/login", data={"token": token})
            assert r.status_code == 303 and r.headers["location"] == "/"
            assert "uPlot.iife.min.js" in c.get("/").text
            [exp] = c.get("/api/dashboard/experiments").json()["experiments"]
            assert (exp["name"], exp["num_trials"], exp["best"]) == ("xs", 3, 12)
            detail = c.get(f"/api/dashboard/experiments/{exp['id']}").json()
            assert sorted(t["config"]["x"] for t in detail["trials"]) == [1, 2, 3]
            assert c.get("/api/dashboard/experiments/" + "0" * 16).status_code == 404
    finally:
        proc.terminate()
        proc.wait(10)
