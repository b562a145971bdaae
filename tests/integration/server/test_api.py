"""The train server over HTTP: submit from a client that exits, follow, list, token, bad input."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import cloudpickle
import pytest

from tandem.jobs.client import parse_sse
from tests.integration.server.conftest import cli, run_client

pytestmark = pytest.mark.timeout(120)

CLIENT = """
import sys, time
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

def loop(config):
    for i in range(config["n"]):
        train.report({"i": i, "loss": 1.0 / (i + 1)})
        time.sleep(config["sleep"])
    print("worker says bye")

handle = DataParallelTrainer(
    loop, train_loop_config={"n": int(sys.argv[1]), "sleep": float(sys.argv[2])},
    scaling_config=ScalingConfig(num_workers=2),
    run_config=RunConfig(storage_path=sys.argv[3], name=sys.argv[4]),
).fit(block=False)
print(handle.job_id)
"""


def read_events(srv, job_id: str, after_seq: int = -1) -> list[tuple[str, dict]]:
    out = []
    with srv.http() as c, c.stream("GET", f"/api/jobs/{job_id}/events",
                                   params={"after_seq": after_seq}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        for event, data in parse_sse(r.iter_lines()):
            out.append((event, json.loads(data)))
            if event == "end":
                break
    return out


def test_job_from_an_exited_client_runs_on_and_streams(server, tmp_path):
    proc = run_client(server, CLIENT, str(tmp_path), "8", "0.15", str(tmp_path / "results"), "exits")
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().splitlines()[-1]
    assert job_id.startswith("job_")
    # the client process is gone; the job runs on and its stream carries state and reports
    events = read_events(server, job_id)
    kinds = [e for e, _ in events]
    assert kinds[0] == "status" and kinds[-1] == "end"
    rows = [row for e, d in events if e == "reports" for row in d["rows"]]
    assert [r["i"] for r in rows] == list(range(8))
    assert events[-1][1]["state"] == "FINISHED"
    states = [d["state"] for e, d in events if e == "status"]
    assert "RUNNING" in states
    # replay from the store after the job ended, from a given seq
    again = read_events(server, job_id, after_seq=4)
    assert [r["i"] for e, d in again if e == "reports" for r in d["rows"]] == [5, 6, 7]

    with server.http() as c:
        job = c.get(f"/api/jobs/{job_id}").json()
        assert job["state"] == "FINISHED"
        assert [t["to_state"] for t in job["transitions"]] == ["PENDING", "RUNNING", "FINISHED"]
        assert job["result"]["metrics"]["i"] == 7
        res = c.get(f"/api/jobs/{job_id}/results", params={"after_seq": 2, "limit": 3}).json()
        assert [r["seq"] for r in res["results"]] == [3, 4, 5] and res["next_after_seq"] == 5
        logs = c.get(f"/api/jobs/{job_id}/logs", params={"rank": 1}).json()
        assert "worker says bye" in logs["text"]
        usage = c.get(f"/api/jobs/{job_id}/usage").json()["samples"]
        assert usage and {s["rank"] for s in usage} <= {0, 1} and usage[0]["rss_bytes"] > 0
        cluster = c.get("/api/cluster").json()
        assert cluster["resources"]["CPU"] == 2
        pool = cluster["warm_pool"]  # the zygote and warm workers the job started from
        assert pool["max_pss_mb"] == 500 and 0 < pool["pss_mb"] <= 500

    out = cli(server, "server", "status")
    assert out.returncode == 0 and " MiB of 500 MiB, " in out.stdout, out.stdout  # warm pool
    out = cli(server, "jobs", "list")
    assert out.returncode == 0, out.stderr
    line = next(ln for ln in out.stdout.splitlines() if job_id in ln)
    assert "FINISHED" in line
    listed = json.loads(cli(server, "jobs", "list", "--json", "--state", "finished").stdout)
    assert job_id in [j["job_id"] for j in listed]
    shown = cli(server, "jobs", "show", job_id)
    assert "RUNNING -> FINISHED" in shown.stdout
    logs = cli(server, "jobs", "logs", job_id)
    assert "(rank=0) worker says bye" in logs.stdout and "(rank=1) worker says bye" in logs.stdout
    followed = cli(server, "jobs", "logs", job_id, "-f", "--rank", "0")
    # -f of one rank: its lines unprefixed, then the job's reports and how it ended
    lines = followed.stdout.strip().splitlines()
    assert lines[0] == "worker says bye", lines
    assert [ln.split(")")[0] for ln in lines[1:4]] == ["(report 1", "(report 2", "(report 3"]
    assert lines[-1].endswith("FINISHED"), lines


def test_jobs_get_results_follows_a_job_another_process_submitted(server, tmp_path):
    """The documented pattern: submit with fit(block=False) and exit; another process
    finds the job by id and iterates its reports (it crashed with an AttributeError when
    only the local job view had the report window)."""
    import tandem

    proc = run_client(server, CLIENT, str(tmp_path), "6", "0.2", str(tmp_path / "results"),
                      "followed")
    assert proc.returncode == 0, proc.stderr
    job_id = proc.stdout.strip().splitlines()[-1]
    tandem.init(address=server.address, token=server.token)
    try:
        handle = tandem.jobs.get(job_id)
        assert handle.job_id == job_id and handle.name == "followed"
        assert [r["i"] for r in handle.results()] == list(range(6))
        assert handle.wait(timeout=60).metrics["i"] == 5
        assert handle.status() == "FINISHED"
        assert "(rank=1) worker says bye" in handle.logs()
        # after the end, a new handle replays every report from the server's store
        assert [r["i"] for r in tandem.jobs.get(job_id).results()] == list(range(6))
    finally:
        tandem.shutdown()


def test_fit_through_tandem_submit_blocks_and_returns_result(server, tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\nfrom tandem import train\n"
        "from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig\n"
        "def loop():\n    train.report({'x': 41 + 1})\n"
        "r = DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1])).fit()\n"
        "print('metrics', r.metrics)\n"
    )
    out = cli(server, "submit", "--priority", "3", "--tag", "nightly", str(script),
              str(tmp_path / "res"), TANDEM_ADDRESS="")
    assert out.returncode == 0, out.stderr
    assert "metrics {'x': 42}" in out.stdout
    job_id = [ln.split()[1] for ln in out.stdout.splitlines() if ln.startswith("submitted ")][0]
    with server.http() as c:
        job = c.get(f"/api/jobs/{job_id}").json()
        assert job["priority"] == 3 and job["tags"] == ["nightly"]
        tagged = c.get("/api/jobs", params={"tag": "nightly"}).json()["jobs"]
        assert [j["job_id"] for j in tagged] == [job_id]


def test_every_endpoint_needs_the_token(server):
    with server.http() as c:
        schema = c.get("/openapi.json").json()
        before = len(c.get("/api/jobs", params={"limit": 10000}).json()["jobs"])
    payload = base64.b64encode(b"not a pickle").decode()
    for path, methods in schema["paths"].items():
        url = path.replace("{job_id}", "job_x").replace("{package_id}", "0" * 32)
        for method in methods:
            for token in (None, "wrong-token"):
                with server.http(token=token) as c:
                    kwargs = {"json": {"payload": payload}} if method == "post" else {}
                    r = c.request(method.upper(), url, **kwargs)
                    assert r.status_code == 401, (method, path, r.status_code)
                    assert "token" in r.json()["detail"]
    for path in ("/openapi.json", "/docs", "/api/jobs/job_x/events?after_seq=-1",
                 "/api/jobs/job_x/logs?follow=true"):
        with server.http(token=None) as c:
            assert c.get(path).status_code == 401
    with server.http(token=None) as c:
        # the dashboard page: a login form, never a token in the URL
        r = c.get("/", params={"token": server.token})
        assert (r.status_code, r.headers["location"]) == (303, "/login")
        cookie = {"Cookie": f"tandem_token={server.token}"}
        assert c.get("/api/jobs", headers=cookie).status_code == 200
        # a write with the cookie alone (a cross-site form) is refused: CSRF header needed
        assert c.post("/api/jobs/job_x/stop", headers=cookie).status_code == 403
    with server.http() as c:
        assert len(c.get("/api/jobs", params={"limit": 10000}).json()["jobs"]) == before


def test_bad_input_is_refused_with_clear_errors(server, tmp_path):
    with server.http() as c:
        r = c.post("/api/jobs", content=b"{not json", headers={"Content-Type": "application/json"})
        assert r.status_code == 422
        r = c.post("/api/jobs", json={"payload": 5, "priority": "high"})
        assert r.status_code == 422
        locs = [d["loc"][-1] for d in r.json()["detail"]]
        assert "payload" in locs and "priority" in locs
        r = c.get("/api/jobs", params={"state": "DONE"})
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "state", 0]
        r = c.post("/api/jobs", json={"payload": "%%%"})
        assert r.status_code == 422 and "base64" in str(r.json()["detail"])
        r = c.post("/api/jobs", json={"payload": base64.b64encode(cloudpickle.dumps(3)).decode()})
        assert r.status_code == 422 and "JobSpec" in str(r.json()["detail"])
        for path in ("/api/jobs/job_nope", "/api/jobs/job_nope/results", "/api/jobs/job_nope/logs",
                     "/api/jobs/job_nope/events", "/api/jobs/job_nope/usage",
                     "/api/jobs/job_nope/outcome"):
            r = c.get(path)
            assert r.status_code == 404 and "job_nope" in r.json()["detail"], path
        assert c.post("/api/jobs/job_nope/stop").status_code == 404
        # answers to questions no job asks: taken, and listed as not open
        r = c.post("/api/calls", json={"answers": [{"job_id": "job_nope", "call_id": 1,
                                                     "value": "continue"}]})
        assert r.status_code == 200 and r.json() == {
            "answered": 0, "unknown": [{"job_id": "job_nope", "call_id": 1}]}
        r = c.post("/api/calls", json={"answers": [{"job_id": "j", "call_id": 0}]})
        assert r.status_code == 422 and "call_id" in str(r.json()["detail"])
        r = c.put("/api/packages/" + "a" * 32, content=os.urandom(2 * 2**20))
        assert r.status_code == 413 and "max-upload-mb" in r.json()["detail"]

    # a payload that needs a module the server cannot import (the script's folder is sent as
    # working_dir by default; this client opts out)
    mod = tmp_path / "proj"
    mod.mkdir()
    (mod / "only_here.py").write_text("def loop():\n    pass\n")
    code = """
    import sys
    import tandem
    tandem.init(runtime_env={"working_dir": None})
    from only_here import loop
    from tandem.train import DataParallelTrainer, RunConfig
    try:
        DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1])).fit(block=False)
    except Exception as e:
        from tandem._core.errors import ConfigError
        print("ConfigError" if isinstance(e, ConfigError) else type(e).__name__, e)
    """
    out = run_client(server, code, str(mod), str(tmp_path / "res"))
    # the client's 422 (UnprocessableEntity) is a ConfigError, as before typed HTTP errors
    assert "ConfigError" in out.stdout and "'only_here'" in out.stdout
    assert "working_dir" in out.stdout, out.stdout

    # a client whose server is down: one clear line naming the address
    code = """
    from tandem.train import DataParallelTrainer
    try:
        DataParallelTrainer(lambda: None).fit()
    except Exception as e:
        print(type(e).__name__ + ": " + str(e))
    """
    out = run_client(server, code, str(tmp_path), TANDEM_ADDRESS="127.0.0.1:1")
    assert out.stdout.strip() == (
        "ServerUnavailableError: cannot reach the tandem server at http://127.0.0.1:1 "
        "(connection refused). Start it with `tandem server start`, or unset TANDEM_ADDRESS "
        "to train in this process.")
    out = cli(server, "jobs", "list", TANDEM_ADDRESS="127.0.0.1:1")
    assert out.returncode == 1 and out.stderr.count("\n") == 1
    assert "cannot reach the tandem server at http://127.0.0.1:1" in out.stderr

    # a second server on the busy port
    out = subprocess.run([sys.executable, "-m", "tandem.server", "--port", str(server.port),
                          "--storage", str(tmp_path / "s2")], env=server.env(HOME=str(tmp_path)),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and f"cannot listen on 127.0.0.1:{server.port}" in out.stderr


def test_working_dir_upload_lets_own_modules_import(server, tmp_path):
    proj = tmp_path / "proj"
    (proj / "pkg").mkdir(parents=True)
    (proj / "pkg" / "__init__.py").write_text("")
    (proj / "pkg" / "model.py").write_text("SCALE = 7\n")
    (proj / "data").mkdir()
    (proj / "data" / "big.bin").write_bytes(os.urandom(3 * 2**20))  # over the 1 MiB limit
    (proj / ".gitignore").write_text("data/\n")
    code = """
    import os, sys
    import tandem
    from tandem import train
    from tandem.train import DataParallelTrainer, RunConfig

    def loop():
        from pkg.model import SCALE
        train.report({"scale": SCALE, "flag": os.environ["MY_FLAG"],
                      "has_data": os.path.exists("data")})

    tandem.init(address=os.environ["TANDEM_ADDRESS"],
                runtime_env={"working_dir": ".", "env_vars": {"MY_FLAG": "on"}})
    r = DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1])).fit()
    print("RESULT", r.metrics)
    """
    out = run_client(server, code, str(proj), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    assert "RESULT {'scale': 7, 'flag': 'on', 'has_data': False}" in out.stdout

    (proj / ".gitignore").write_text("")  # now the data goes too: over the limit
    out = run_client(server, code, str(proj), str(tmp_path / "res"))
    assert out.returncode != 0
    assert "upload limit" in out.stderr and ".gitignore" in out.stderr


def test_priority_orders_the_queue(server, tmp_path):
    code = """
    import sys, time
    from tandem import train
    from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

    def loop(config):
        time.sleep(config["sleep"])
        train.report({"t": time.time()})

    store = sys.argv[1]
    ids = []
    for name, workers, sleep, prio in (("big", 2, 1.0, 0), ("low", 2, 0.1, 0), ("high", 2, 0.1, 9)):
        from tandem.jobs import client
        h = DataParallelTrainer(loop, train_loop_config={"sleep": sleep},
                                scaling_config=ScalingConfig(num_workers=workers),
                                run_config=RunConfig(storage_path=store, name=name))._submit(priority=prio)
        ids.append(h.job_id)
    for jid in ids:
        from tandem.jobs import get
        get(jid).wait(60)
    print(" ".join(ids))
    """
    out = run_client(server, code, str(tmp_path), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    big, low, high = out.stdout.split()
    with server.http() as c:
        started = {j: c.get(f"/api/jobs/{j}").json()["started_at"] for j in (big, low, high)}
    assert started[big] < started[high] < started[low]


def test_tuner_fit_goes_to_the_server(server, tmp_path):
    """A Tuner's trials run as the server's jobs; ASHA ends them at max_t (the last report),
    and each trial reads TERMINATED in ``tandem jobs list``, the API and the dashboard's
    experiments view alike (however its job ended: finished, or stopped by the scheduler)."""
    code = """
    import os, sys, tempfile
    from tandem import tune
    from tandem.train import Checkpoint
    from tandem.tune.schedulers import ASHAScheduler

    def objective(config):
        for i in range(3):
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "w"), "w").write(str(i))
                tune.report({"score": config["x"] * (i + 1)},
                            checkpoint=Checkpoint.from_directory(d))

    grid = tune.Tuner(objective, param_space={"x": tune.grid_search([1, 2])},
                      tune_config=tune.TuneConfig(
                          metric="score", mode="max",
                          scheduler=ASHAScheduler(time_attr="training_iteration", max_t=3)),
                      run_config=tune.RunConfig(storage_path=sys.argv[1], name="exp")).fit()
    best = grid.get_best_result()
    print("BEST", best.metrics["score"], os.path.basename(best.checkpoint.path), grid.num_errors)
    """
    out = run_client(server, code, str(tmp_path), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    assert "BEST 6 checkpoint_000003 0" in out.stdout
    with server.http() as c:
        jobs = c.get("/api/jobs", params={"limit": 1000}).json()["jobs"]
    trial_jobs = {j["job_id"]: j["state"] for j in jobs if j["name"].startswith("objective_")}
    assert list(trial_jobs.values()) == ["TERMINATED", "TERMINATED"], jobs
    with server.http() as c:  # the dashboard's jobs table too
        shown = c.get("/api/dashboard/jobs", params={"limit": 100}).json()["jobs"]
    assert {j["job_id"]: j["state"] for j in shown if j["job_id"] in trial_jobs} == trial_jobs
    listing = cli(server, "jobs", "list", "--limit", "1000").stdout
    assert {r.split()[0]: r.split()[1] for r in listing.splitlines()
            if r.split() and r.split()[0] in trial_jobs} == trial_jobs, listing
    from tandem.server.dashboard.ondisk import ResultsIndex

    index = ResultsIndex([str(tmp_path / "res")])
    (exp,) = index.list_experiments()
    assert exp["status"] == {"TERMINATED": 2}
    assert [t["status"] for t in index.experiment(exp["id"])["trials"]] == ["TERMINATED"] * 2
