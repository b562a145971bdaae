"""Users and roles on the train server (issue 24 item 1), each rule through the HTTP API of
a real in-process server on SQLite and on PostgreSQL: admin / member / viewer tokens,
owners of jobs and registered models, 403s that name the owner, the audit log, an old
store that opens, and quotas set over HTTP (item 2)."""

from __future__ import annotations

import base64
import io
import os
import sys
import tarfile
import time

import cloudpickle
import pytest
import sqlalchemy as sa
from fastapi.testclient import TestClient

from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec, JobStatus
from tandem.jobs.store import JobRecord, open_store
from tandem.server import ServerConfig, TrainServer, create_app

pytestmark = pytest.mark.timeout(180)

ADMIN_TOKEN = "the-servers-own-token"


class _Waits(JobRunner):
    """Runs (on a thread of the server, no processes) until stopped."""

    def run(self, ctx):  # type: ignore[no-untyped-def]
        ctx.stop_event.wait(120)
        return JobOutcome(JobStatus.STOPPED)


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _job(name: str, owner: str | None = None, cpus: float = 0.5, **metadata: str) -> dict:
    spec = JobSpec(name=name, bundles=({"CPU": cpus},), runner=_Waits(), owner=owner,
                   metadata=metadata)
    return {"payload": base64.b64encode(cloudpickle.dumps(spec)).decode()}


def _model_files() -> str:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = cloudpickle.dumps({"weights": [1, 2, 3]})
        info = tarfile.TarInfo("model.pkl")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return base64.b64encode(buf.getvalue()).decode()


def _wait(fn, what: str, timeout_s: float = 60):
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def served(request, tmp_path):
    db = request.getfixturevalue("postgres_database_url") if request.param == "postgres" else None
    server = TrainServer(ServerConfig(storage=str(tmp_path / "srv"), db=db, num_cpus=2,
                                      usage_interval_s=0, scheduling="fair"))
    try:
        with TestClient(create_app(server, ADMIN_TOKEN)) as client:
            yield server, client
    finally:
        for job in server.service.list():
            if not job.status.is_terminal:
                server.service.stop(job.job_id)
        server.close()


def _as(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def test_roles_owners_and_the_audit_log_through_the_http_api(served, tmp_path):
    server, c = served
    admin = _as(ADMIN_TOKEN)
    # --- users: the server's token is the admin's; each user gets a token once
    tokens = {}
    for name, role in (("alice", "member"), ("bob", "member"), ("vic", "viewer")):
        r = c.post("/api/users", json={"name": name, "role": role}, headers=admin)
        assert r.status_code == 201, r.text
        tokens[name] = r.json()["token"]
    alice, bob, vic = (_as(tokens[n]) for n in ("alice", "bob", "vic"))
    assert c.get("/api/me", headers=admin).json() == {"name": "admin", "role": "admin"}
    assert c.get("/api/me", headers=alice).json() == {"name": "alice", "role": "member"}
    assert c.get("/api/me", headers=vic).json() == {"name": "vic", "role": "viewer"}
    r = c.post("/api/users", json={"name": "alice", "role": "member"}, headers=admin)
    assert r.status_code == 409 and "exists already" in r.json()["detail"]
    r = c.post("/api/users", json={"name": "eve", "role": "root"}, headers=admin)
    assert r.status_code == 422
    listed = c.get("/api/users", headers=admin).json()["users"]
    assert [(u["name"], u["role"]) for u in listed] == [
        ("admin", "admin"), ("alice", "member"), ("bob", "member"), ("vic", "viewer")]
    # stored hashed: no token (nor its secret) anywhere in the table
    engine = sa.create_engine(server.config.db_url.replace("postgresql://",
                                                           "postgresql+psycopg://"))
    with engine.connect() as conn:
        rows = [tuple(str(v) for v in r) for r in conn.execute(sa.text(
            "SELECT * FROM tandem_users"))]
    engine.dispose()
    for tok in tokens.values():
        secret = tok.split("_", 2)[2]
        assert not any(secret in v for row in rows for v in row)
    assert all(any(v.startswith("pbkdf2_sha256$") for v in row) for row in rows)

    # --- jobs: everyone sees every job with its owner; members stop only their own
    ja = c.post("/api/jobs", json=_job("a"), headers=alice)
    jb = c.post("/api/jobs", json={**_job("b"), "runtime_env": {"env_vars": {"KEY": "s3cr3t"}}},
                headers=bob)
    assert ja.status_code == jb.status_code == 201, (ja.text, jb.text)
    ja, jb = ja.json()["job_id"], jb.json()["job_id"]
    for who in (vic, alice, admin):
        owners = {j["job_id"]: j["owner"] for j in c.get("/api/jobs", headers=who).json()["jobs"]}
        assert owners == {ja: "alice", jb: "bob"}
    assert c.get(f"/api/jobs/{jb}", headers=vic).json()["owner"] == "bob"
    # environment variables (often credentials) are read by the owner and admins only
    assert c.get(f"/api/jobs/{jb}", headers=bob).json()["spec"]["env_vars"] == {"KEY": "s3cr3t"}
    assert c.get(f"/api/jobs/{jb}", headers=admin).json()["spec"]["env_vars"] == {"KEY": "s3cr3t"}
    for who in (alice, vic):
        assert "s3cr3t" not in c.get(f"/api/jobs/{jb}", headers=who).text
    r = c.post(f"/api/jobs/{jb}/stop", headers=alice)
    assert r.status_code == 403, r.text
    assert "belongs to 'bob'" in r.json()["detail"] and "alice" in r.json()["detail"]
    r = c.post(f"/api/jobs/{ja}/stop", headers=vic)
    assert r.status_code == 403 and "viewer" in r.json()["detail"]
    r = c.post("/api/jobs", json=_job("v"), headers=vic)
    assert r.status_code == 403 and "may only read" in r.json()["detail"]
    r = c.post("/api/jobs", json=_job("x", owner="bob"), headers=alice)
    assert r.status_code == 403 and "only an admin submits for someone else" in r.text
    # the member's tune client answers only its own jobs' questions
    r = c.post("/api/calls", json={"answers": [{"job_id": jb, "call_id": 1, "value": "stop"}]},
               headers=alice)
    assert r.status_code == 403 and "belongs to 'bob'" in r.json()["detail"]
    r = c.get(f"/api/jobs/{jb}/events", params={"calls": "true"}, headers=alice)
    assert r.status_code == 403 and "belongs to 'bob'" in r.json()["detail"]
    assert c.post(f"/api/jobs/{ja}/stop", headers=alice).status_code == 200
    assert c.post(f"/api/jobs/{jb}/stop", headers=admin).status_code == 200  # admins: all
    _wait(lambda: {j["state"] for j in c.get("/api/jobs", headers=vic).json()["jobs"]}
          == {"STOPPED"}, "every job stopped")
    assert c.get(f"/api/jobs/{ja}", headers=vic).json()["state"] == "STOPPED"

    # --- an experiment folder is the user's whose trial first wrote there
    exp = tmp_path / "results" / "sweep"
    os.makedirs(exp / "trial_0")
    (exp / "experiment_state.json").write_text('{"trials": [], "metric": "loss"}')
    jt = c.post("/api/jobs", json=_job("trial_0", run_path=str(exp / "trial_0")), headers=alice)
    assert jt.status_code == 201, jt.text
    assert c.post(f"/api/jobs/{jt.json()['job_id']}/stop", headers=alice).status_code == 200
    exps = c.get("/api/dashboard/experiments", headers=vic).json()["experiments"]
    assert [(e["name"], e["owner"]) for e in exps] == [("sweep", "alice")]

    # --- registered models: the first to register a name owns it
    files = _model_files()
    r = c.post("/api/models/digits/versions", json={"meta": {}, "files": files}, headers=alice)
    assert r.status_code == 201, r.text
    r = c.put("/api/models/digits/aliases/prod", json={"version": 1}, headers=bob)
    assert r.status_code == 403 and "model digits belongs to 'alice'" in r.json()["detail"]
    r = c.post("/api/models/digits/versions", json={"meta": {}, "files": files}, headers=bob)
    assert r.status_code == 403
    assert c.delete("/api/models/digits/versions/1", headers=bob).status_code == 403
    assert c.put("/api/models/digits/aliases/prod", json={"version": 1},
                 headers=alice).status_code == 200
    assert c.post("/api/models/digits/versions", json={"meta": {}, "files": files},
                  headers=admin).status_code == 201
    assert c.delete("/api/models/digits/versions/2", headers=admin).status_code == 200
    models = c.get("/api/dashboard/models", headers=vic).json()["models"]
    assert [(m["name"], m["owner"]) for m in models] == [("digits", "alice")]

    # --- a viewer only reads: each kind of write is refused, naming the rule
    for method, path, body in (
            ("POST", "/api/models/digits/versions", {"meta": {}, "files": files}),
            ("PUT", "/api/models/digits/aliases/prod", {"version": 1}),
            ("DELETE", "/api/models/digits/versions/1", None),
            ("PUT", "/api/packages/" + "0" * 16, None),
            ("POST", "/api/calls", {"answers": []})):
        r = c.request(method, path, json=body, headers=vic)
        assert r.status_code == 403 and "may only read" in r.json()["detail"], (path, r.text)
    versions = c.get("/api/models/digits", headers=vic).json()["versions"]
    assert [v["version"] for v in versions] == [1]  # nothing the viewer sent changed it

    # --- admin-only routes
    for path in ("/api/users", "/api/audit"):
        r = c.get(path, headers=alice)
        assert r.status_code == 403 and "for admins" in r.json()["detail"], path
    assert c.delete("/api/users/bob", headers=alice).status_code == 403
    # --- revoking works at once
    assert c.get("/api/jobs", headers=bob).status_code == 200
    assert c.delete("/api/users/bob", headers=admin).status_code == 200
    assert c.get("/api/jobs", headers=bob).status_code == 401
    assert c.delete("/api/users/bob", headers=admin).status_code == 404

    # --- the audit log: who did what to which object, and the outcome
    entries = c.get("/api/audit", headers=admin, params={"limit": 1000}).json()["entries"]
    seen = {(e["user"], e["action"], e["target"], e["outcome"]) for e in entries}
    assert ("alice", "jobs.submit", f"job {ja}", "ok") in seen
    assert ("alice", "jobs.stop", f"job {jb}", "denied") in seen
    assert ("alice", "jobs.stop", f"job {ja}", "ok") in seen
    assert ("admin", "jobs.stop", f"job {jb}", "ok") in seen
    assert ("vic", "jobs.submit", None, "denied") in seen
    assert ("bob", "models.alias", "model digits", "denied") in seen
    assert ("admin", "users.add", "user alice", "ok") in seen
    assert ("admin", "users.revoke", "user bob", "ok") in seen
    assert all(e["time"] > 0 for e in entries)
    only_alice = c.get("/api/audit", headers=admin, params={"user": "alice"}).json()["entries"]
    assert only_alice and {e["user"] for e in only_alice} == {"alice"}


def test_quotas_set_over_http_hold_a_users_jobs_with_the_reason(served):
    server, c = served
    admin = _as(ADMIN_TOKEN)
    token = c.post("/api/users", json={"name": "alice"}, headers=admin).json()["token"]
    alice = _as(token)
    r = c.put("/api/quotas/alice", json={"cpus": 1}, headers=alice)
    assert r.status_code == 403
    r = c.put("/api/quotas/alice", json={"cpus": -1}, headers=admin)
    assert r.status_code == 422
    r = c.put("/api/quotas/alice", json={"cpus": 1, "queued_jobs": 1}, headers=admin)
    quota = {"alice": {"cpus": 1.0, "queued_jobs": 1}}
    assert r.status_code == 200 and r.json()["quotas"] == quota
    first = c.post("/api/jobs", json=_job("q1", cpus=1), headers=alice).json()["job_id"]
    second = c.post("/api/jobs", json=_job("q2", cpus=1), headers=alice).json()["job_id"]
    _wait(lambda: c.get(f"/api/jobs/{first}", headers=alice).json()["state"] == "RUNNING",
          "alice's first job runs")
    queue = _wait(lambda: c.get("/api/dashboard/cluster", headers=alice).json()["queue"],
                  "alice's second job in the queue")
    assert [q["job_id"] for q in queue] == [second]
    assert "waits: alice's quota CPU 1/1" in queue[0]["reason"], queue
    # past queued_jobs, a submission is refused at once, saying what to do
    r = c.post("/api/jobs", json=_job("q3", cpus=1), headers=alice)
    assert r.status_code == 422, r.text
    assert "alice's quota allows queued_jobs=1" in r.json()["detail"]
    assert "tandem jobs stop" in r.json()["detail"]
    # kept in the store: a restarted server applies it again
    from tandem.server.users_api import apply_stored_quotas, quotas_in_force

    server.service.set_quota("alice", None)
    assert quotas_in_force(server) == {}
    apply_stored_quotas(server, server.accounts())
    assert quotas_in_force(server) == quota
    assert c.delete("/api/quotas/alice", headers=admin).json()["quotas"] == {}
    _wait(lambda: c.get(f"/api/jobs/{second}", headers=alice).json()["state"] == "RUNNING",
          "the second job runs once the quota is gone")


def test_a_store_written_before_users_existed_opens_and_its_jobs_are_the_admins(tmp_path):
    storage = tmp_path / "srv"
    db = "sqlite:///" + str(storage / "jobs.db")
    with open_store(db) as store:  # today's schema, no users tables
        store.create_job(JobRecord(job_id="job_old", name="old", state="FINISHED",
                                   submitted_at=time.time(), spec_json={"num_workers": 1}))
    server = TrainServer(ServerConfig(storage=str(storage), num_cpus=1, usage_interval_s=0))
    try:
        with TestClient(create_app(server, ADMIN_TOKEN)) as c:
            token = c.post("/api/users", json={"name": "mia"},
                           headers=_as(ADMIN_TOKEN)).json()["token"]
            jobs = c.get("/api/jobs", headers=_as(token)).json()["jobs"]
            assert [(j["job_id"], j["owner"]) for j in jobs] == [("job_old", "admin")]
            r = c.post("/api/jobs/job_old/stop", headers=_as(token))
            assert r.status_code == 403 and "belongs to 'admin'" in r.json()["detail"]
            # a FIFO server has no quotas: setting one says what to do
            r = c.put("/api/quotas/mia", json={"cpus": 1}, headers=_as(ADMIN_TOKEN))
            assert r.status_code == 422 and "--scheduling" in r.json()["detail"]
    finally:
        server.close()
    assert os.path.exists(storage / "jobs.db")


def test_groups_quotas_and_a_role_changed_in_place_over_http(served):
    server, c = served
    admin = _as(ADMIN_TOKEN)
    alice = _as(c.post("/api/users", json={"name": "alice", "group": "ml"},
                       headers=admin).json()["token"])
    bob = _as(c.post("/api/users", json={"name": "bob"}, headers=admin).json()["token"])
    assert c.put("/api/users/bob/group", json={"group": "ml"}, headers=bob).status_code == 403
    assert c.put("/api/users/bob/group", json={"group": "m l"}, headers=admin).status_code == 422
    assert c.put("/api/users/nobody/group", json={"group": "ml"},
                 headers=admin).status_code == 404
    assert c.put("/api/users/bob/group", json={"group": "ml"}, headers=admin).status_code == 200
    assert c.put("/api/groups/ml/quota", json={"cpus": 1}, headers=alice).status_code == 403
    r = c.put("/api/groups/ml/quota", json={"cpus": 1, "queued_jobs": 5}, headers=admin)
    assert r.status_code == 200 and r.json()["groups"]["ml"]["members"] == ["alice", "bob"]
    first = c.post("/api/jobs", json=_job("g1", cpus=1), headers=alice).json()["job_id"]
    _wait(lambda: c.get(f"/api/jobs/{first}", headers=bob).json()["state"] == "RUNNING",
          "alice's job runs")
    second = c.post("/api/jobs", json=_job("g2", cpus=0.5), headers=bob).json()["job_id"]
    queue = _wait(lambda: c.get("/api/dashboard/cluster", headers=bob).json()["queue"],
                  "bob's job in the queue")
    # bob has no quota of his own: his group's (held by alice) holds his job
    assert [q["job_id"] for q in queue] == [second]
    assert "waits: group ml's quota CPU 1/1 (this job needs 0.5 more)" in queue[0]["reason"]
    groups = c.get("/api/groups", headers=bob).json()["groups"]
    assert groups["ml"] == {"members": ["alice", "bob"], "quota": {"cpus": 1.0, "queued_jobs": 5},
                            "in_use": {"CPU": 1.0}}
    # kept in the store: a restarted server applies memberships and group quotas again
    from tandem.server.routes_team import apply_stored_groups

    server.service.set_group_quota("ml", None)
    server.service.set_group("bob", None)
    apply_stored_groups(server, server.accounts())
    assert server.service.scheduler.quotas.by_group["ml"].cpus == 1.0
    assert server.service.scheduler.quotas.group_of == {"alice": "ml", "bob": "ml"}
    # a role changed in place: bob's token stays, but he may only read now
    assert c.put("/api/users/bob/role", json={"role": "viewer"}, headers=bob).status_code == 403
    assert c.put("/api/users/bob/role", json={"role": "boss"}, headers=admin).status_code == 422
    r = c.put("/api/users/bob/role", json={"role": "viewer"}, headers=admin)
    assert r.json() == {"name": "bob", "role": "viewer", "was": "member"}
    assert c.get("/api/me", headers=bob).json() == {"name": "bob", "role": "viewer"}
    assert c.post("/api/jobs", json=_job("g3"), headers=bob).status_code == 403
    users = {u["name"]: u for u in c.get("/api/users", headers=admin).json()["users"]}
    assert users["bob"]["role"] == "viewer" and users["bob"]["group"] == "ml"
    log = c.get("/api/audit", params={"user": "admin"}, headers=admin).json()["entries"]
    seen = {(e["action"], e["target"], e["outcome"], e["detail"]) for e in log}
    assert ("users.set_role", "user bob", "ok", "member -> viewer") in seen
    assert ("users.set_group", "user bob", "ok", "group ml") in seen
    assert ("quotas.set", "group ml", "ok", None) in seen
    denied = c.get("/api/audit", params={"user": "bob"}, headers=admin).json()["entries"]
    assert {e["action"] for e in denied if e["outcome"] == "denied"} >= {
        "users.set_group", "users.set_role", "jobs.submit"}
    assert c.delete("/api/groups/ml/quota", headers=admin).status_code == 200
    _wait(lambda: c.get(f"/api/jobs/{second}", headers=alice).json()["state"] == "RUNNING",
          "bob's job runs once the group's quota is gone")


def test_groups_list_every_member_however_the_user_was_made(tmp_path):
    """``GET /api/groups`` and ``GET /api/users`` show each group's members whichever way
    the membership was made: in the server's ``--quotas`` config (``"group:ml":
    {"members": [...]}``, for an owner with a token or a bare owner name), with
    ``POST /api/users {"group"}``, or ``PUT /api/users/{name}/group`` (the server's own
    token's user, ``admin``, too); and a group's quota from the config beside one set over
    HTTP."""
    server = TrainServer(ServerConfig(
        storage=str(tmp_path / "srv"), num_cpus=2, usage_interval_s=0, scheduling="fair",
        quotas={"group:ml": {"cpus": 1, "members": ["carol", "dave"]}}))  # type: ignore[dict-item]
    try:
        with TestClient(create_app(server, ADMIN_TOKEN)) as c:
            admin = _as(ADMIN_TOKEN)
            alice = _as(c.post("/api/users", json={"name": "alice", "group": "ml"},
                               headers=admin).json()["token"])
            assert c.post("/api/users", json={"name": "carol"},  # her group: the config's
                          headers=admin).status_code == 201
            assert c.put("/api/users/admin/group", json={"group": "ops"},
                         headers=admin).status_code == 200
            assert c.put("/api/groups/ops/quota", json={"queued_jobs": 3},
                         headers=admin).status_code == 200
            # dave has no token: the admin submits for him (an owner named in the config)
            job = c.post("/api/jobs", json=_job("d1", owner="dave"), headers=admin)
            assert job.status_code == 201, job.text
            _wait(lambda: c.get(f"/api/jobs/{job.json()['job_id']}",
                                headers=alice).json()["state"] == "RUNNING", "dave's job runs")
            groups = c.get("/api/groups", headers=alice).json()["groups"]
            assert groups == {
                "ml": {"members": ["alice", "carol", "dave"], "quota": {"cpus": 1.0},
                       "in_use": {"CPU": 0.5}},
                "ops": {"members": ["admin"], "quota": {"queued_jobs": 3}, "in_use": {}}}
            users = {u["name"]: u["group"] for u in
                     c.get("/api/users", headers=admin).json()["users"]}
            assert users == {"admin": "ops", "alice": "ml", "carol": "ml"}
            # a member taken out over HTTP leaves the list, whichever way she came in
            assert c.delete("/api/users/carol/group", headers=admin).status_code == 200
            groups = c.get("/api/groups", headers=alice).json()["groups"]
            assert groups["ml"]["members"] == ["alice", "dave"]
            assert server.service.scheduler.quotas.group_of == {
                "alice": "ml", "dave": "ml", "admin": "ops"}
            c.post(f"/api/jobs/{job.json()['job_id']}/stop", headers=admin)
    finally:
        for j in server.service.list():
            if not j.status.is_terminal:
                server.service.stop(j.job_id)
        server.close()


def test_one_person_with_no_configuration_works_as_before_users_existed(tmp_path):
    """A fresh server with no users and no scheduling options: the server's own token does
    everything, as before issue 24 (no login step, no quotas, FIFO order whatever the
    priority); its jobs are the admin's, and nothing asks for users or groups."""
    server = TrainServer(ServerConfig(storage=str(tmp_path / "srv"), num_cpus=1,
                                      usage_interval_s=0))
    try:
        with TestClient(create_app(server, ADMIN_TOKEN)) as c:
            admin = _as(ADMIN_TOKEN)
            assert c.get("/api/jobs").status_code == 401  # a token is needed, as before
            assert c.get("/api/me", headers=admin).json() == {"name": "admin", "role": "admin"}
            first = c.post("/api/jobs", json=_job("first", cpus=1), headers=admin)
            assert first.status_code == 201, first.text
            urgent = c.post("/api/jobs", json={**_job("urgent", cpus=1), "priority": 9},
                            headers=admin).json()["job_id"]
            first = first.json()["job_id"]
            _wait(lambda: c.get(f"/api/jobs/{first}", headers=admin).json()["state"]
                  == "RUNNING", "the first job runs")
            queue = _wait(lambda: c.get("/api/dashboard/cluster", headers=admin).json()[
                "queue"], "the second job queued")
            # FIFO: a higher priority waits its turn (no preemption), for resources only
            assert [q["job_id"] for q in queue] == [urgent]
            assert queue[0]["reason"] == "needs CPU 1 (free 0)", queue
            assert c.get(f"/api/jobs/{first}", headers=admin).json()["owner"] == "admin"
            assert [u["name"] for u in c.get("/api/users", headers=admin).json()["users"]] \
                == ["admin"]
            assert c.get("/api/groups", headers=admin).json() == {"scheduling": "fifo",
                                                                  "groups": {}}
            assert c.post(f"/api/jobs/{first}/stop", headers=admin).status_code == 200
            _wait(lambda: c.get(f"/api/jobs/{urgent}", headers=admin).json()["state"]
                  == "RUNNING", "the second job runs once the first is stopped")
            assert c.post(f"/api/jobs/{urgent}/stop", headers=admin).status_code == 200
    finally:
        server.close()
