"""Experiments and runs on disk as the dashboard reads them."""

from __future__ import annotations

import json
import os

from tandem.server.dashboard.ondisk import ResultsIndex, path_id


def _run(path, rows, ckpt_iters=(), config=None):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "result.json"), "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
        f.write('{"loss": 0.1, "training_it')  # a line being written right now
    for it in ckpt_iters:
        os.makedirs(os.path.join(path, f"checkpoint_{it:06d}"))
    if config is not None:
        with open(os.path.join(path, "params.json"), "w") as f:
            json.dump(config, f)
    os.makedirs(os.path.join(path, "logs"), exist_ok=True)
    with open(os.path.join(path, "logs", "rank_0.log"), "w") as f:
        f.write("hello from rank 0\n")


def test_experiments_and_runs_are_found_and_read(tmp_path):
    root = tmp_path / "results"
    exp = root / "sweep"
    trials = []
    for i, lr in enumerate((0.1, 0.5)):
        p = exp / f"t_{i}"
        _run(str(p), [{"loss": lr * (5 - k), "training_iteration": k, "note": "x"}
                      for k in range(1, 5)], config={"lr": lr})
        trials.append({"trial_id": f"t{i}", "name": f"t_{i}", "index": i,
                       "status": "TERMINATED", "config": {"lr": lr, "net": {"layers": 2}},
                       "path": str(p), "last_result": {"loss": lr}, "error": None,
                       "decisions": [{"iteration": 2, "action": "STOP", "reason": "asha"}]
                       if i else []})
    trials.append({"trial_id": "evil", "name": "evil", "index": 2, "status": "TERMINATED",
                   "config": {}, "path": "/etc", "last_result": {}})
    (exp / "experiment_state.json").write_text(json.dumps(
        {"trials": trials, "metric": "loss", "mode": "min", "timestamp": 1.0}))
    _run(str(root / "single"), [{"accuracy": 0.5 + k / 10, "training_iteration": k}
                                for k in range(1, 12)], ckpt_iters=(5, 10), config={"a": 1})

    ix = ResultsIndex([str(root)])
    [e] = ix.list_experiments()
    assert (e["name"], e["num_trials"], e["metric"], e["best"]) == ("sweep", 3, "loss", 0.1)
    d = ix.experiment(e["id"])
    assert d["config_keys"] == ["lr", "net/layers"]
    t0, t1, evil = d["trials"]
    assert t0["best"] == 0.1 and t1["best"] == 0.5 and len(t1["rows"]) == 4
    assert "note" not in t1["rows"][0]  # numbers only
    assert t1["decisions"][0]["action"] == "STOP"
    assert evil["rows"] == []  # a trial path outside the experiment is not read
    assert ix.experiment(e["id"], metric="training_iteration")["metric"] == "training_iteration"

    [r] = ix.list_runs()
    assert r["name"] == "single" and r["metrics"]["training_iteration"] == 11
    run = ix.run(r["id"])
    assert [c["iteration"] for c in run["checkpoints"]] == [5, 10]
    assert run["checkpoints"][1]["metrics"]["accuracy"] == 1.5
    assert run["logs"] == {"0": "hello from rank 0\n"} and run["config"] == {"a": 1}
    assert ix.run(t1["run_id"])["name"] == "t_1"  # a trial's folder opens as a run
    assert ix.run(path_id("/etc")) is None and ix.experiment("0" * 16) is None


def test_long_curves_are_thinned_keeping_the_last_point(tmp_path):
    _run(str(tmp_path / "r"), [{"loss": 1 / k, "training_iteration": k} for k in range(1, 10001)])
    ix = ResultsIndex([str(tmp_path)])
    [r] = ix.list_runs()
    rows = ix.run(r["id"])["rows"]
    assert len(rows) == 2000 and rows[-1]["training_iteration"] == 10000


def test_a_big_experiment_sends_the_curves_of_its_best_trials_only(tmp_path):
    exp = tmp_path / "big"
    trials = []
    for i in range(60):
        p = exp / f"t{i}"
        _run(str(p), [{"loss": i + 1 / k, "training_iteration": k} for k in range(1, 4)])
        trials.append({"trial_id": str(i), "name": f"t{i}", "index": i, "status": "TERMINATED",
                       "config": {"i": i}, "path": str(p), "last_result": {"loss": i}})
    (exp / "experiment_state.json").write_text(json.dumps(
        {"trials": trials, "metric": "loss", "mode": "min"}))
    ix = ResultsIndex([str(tmp_path)])
    d = ix.experiment(ix.list_experiments()[0]["id"])
    assert d["curves_shown"] == 50 and len(d["trials"]) == 60
    with_curves = [t["index"] for t in d["trials"] if t["rows"]]
    assert with_curves == list(range(50))  # the 50 lowest losses
    assert all(t["best"] is not None for t in d["trials"])


def test_trials_and_their_jobs_are_named_with_the_trials_words():
    from tandem.server.dashboard.ondisk import trial_state
    from tandem.server.vocabulary import shown_job_state

    # the dashboard: a trial's own status, in Ray Tune's words, however its job ended
    assert trial_state({"status": "TERMINATED", "job_state": "STOPPED"}) == "TERMINATED"
    assert trial_state({"status": "TERMINATED", "job_state": "FINISHED"}) == "TERMINATED"
    assert trial_state({"status": "ERROR", "job_state": "FAILED"}) == "ERROR"
    assert trial_state({"status": "RUNNING", "job_state": "STOPPED"}) == "RUNNING"  # restarted
    assert trial_state({"status": "PAUSED"}) == "PAUSED"
    # tandem jobs list / the API: a trial's job ends in the same words; other jobs keep theirs
    trial = {"trial_id": "a1b2c3", "run_path": "/x"}
    assert [shown_job_state(s, trial) for s in ("FINISHED", "STOPPED", "FAILED")] == [
        "TERMINATED", "TERMINATED", "ERROR"]
    assert [shown_job_state(s, trial) for s in ("PENDING", "RUNNING", "RESTARTING")] == [
        "PENDING", "RUNNING", "RESTARTING"]
    assert [shown_job_state(s, {"run_path": "/x"}) for s in ("FINISHED", "STOPPED")] == [
        "FINISHED", "STOPPED"]
    assert shown_job_state("STOPPED", None) == "STOPPED"


def test_local_dashboard_answers_a_bad_experiment_id_with_a_plain_404(tmp_path):
    from fastapi.testclient import TestClient

    from tandem.server.dashboard.local_app import local_app

    client = TestClient(local_app([str(tmp_path)], "tok"))
    auth = {"Authorization": "Bearer tok"}
    for bad in ("nothex", "0123456789abcdef", "x" * 300, "'; drop"):
        for what in ("experiments", "runs"):
            r = client.get(f"/api/dashboard/{what}/{bad}", headers=auth)
            assert r.status_code == 404, (bad, r.text)
            detail = r.json()["detail"]
            assert isinstance(detail, str) and f"no {what[:-1]} with id" in detail, detail
            assert f"GET /api/dashboard/{what}" in detail
