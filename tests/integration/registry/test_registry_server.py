"""The cluster-scoped registry on a real train server (its database and storage), and a
model served as a job on it."""

from __future__ import annotations

import json
import os
import socket
import time

import httpx
import pytest

from tandem._core.errors import JobNotFoundError
from tandem.jobs.client import Conflict, NotFound, ServerConnection, Unauthorized
from tests.integration.registry._util import MODEL_SRC, check, run_script
from tests.integration.server.conftest import cli, start_server, wait_state

pytestmark = pytest.mark.slow


def test_registry_lives_in_the_server_and_survives_restarts(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    storage = str(tmp_path / "storage")
    srv = start_server(home, storage)
    try:
        putter = MODEL_SRC + '''
from tandem import model
for seed in (1, 2):
    m = DigitsMLP({"seed": seed})
    print(model.put(m, name="digits", tags={"seed": seed}))
np.save("expected.npy", m.predict(digits(20)).numpy())
model.alias("digits", "prod", 2)
'''
        out = check(run_script(putter, str(tmp_path), srv.env()))
        assert out.split() == ["digits@1", "digits@2"]
        # rows in the server's own database, files in its storage, not in the client's HOME
        assert not os.path.exists(os.path.join(home, ".tandem", "models"))
        assert os.path.isdir(os.path.join(storage, "models", "digits"))
        with srv.http() as c:
            listed = c.get("/api/models").json()["models"]
            assert [(m["name"], m["versions"], m["aliases"]) for m in listed] == [
                ("digits", 2, {"prod": 2})]
            v = c.get("/api/models/digits/versions/prod").json()
            assert v["version"] == 2 and v["tags"] == {"seed": 2}
            r = c.get("/api/models/nope")
            assert r.status_code == 404 and "Registered models: digits" in r.json()["detail"]
            r = c.delete("/api/models/digits/versions/2")
            assert r.status_code == 409 and "move the alias first" in r.json()["detail"]
            r = c.post("/api/models/digits/versions", json={"files": "!!", "meta": {}})
            assert r.status_code == 422
        with srv.http(token=None) as c:
            assert c.get("/api/models").status_code == 401
        # the client raises each status as its own class, with the server's detail
        conn = ServerConnection(srv.url, srv.token)
        try:
            with pytest.raises(Conflict) as conflict:
                conn.json("DELETE", "/api/models/digits/versions/2")
            assert conflict.value.status == 409 and "move the alias first" in conflict.value.detail
            with pytest.raises(NotFound) as missing:
                conn.json("GET", "/api/models/nope")
            assert isinstance(missing.value, JobNotFoundError)
            assert "Registered models: digits" in str(missing.value)
        finally:
            conn.close()
        with pytest.raises(Unauthorized):
            ServerConnection(srv.url, None).json("GET", "/api/models")

        r = cli(srv, "models", "list")
        assert r.returncode == 0 and "digits  versions=2  latest=2" in r.stdout
        assert "aliases: prod->2" in r.stdout
        r = cli(srv, "models", "delete", "digits@2")
        assert r.returncode == 1 and "digits@2 is aliased (digits@prod)" in r.stderr

        srv.stop()
        srv = start_server(home, storage, srv.port)  # a new server process, same store
        getter = '''
import numpy as np
from sklearn.datasets import load_digits
from tandem import model
m = model.get("digits@prod")
X = load_digits().data.astype("float32")[:20] / 16.0
print(m.config["seed"], bool(np.allclose(m.predict(X).numpy(), np.load("expected.npy"),
                                         atol=1e-6)))
'''
        assert check(run_script(getter, str(tmp_path), srv.env())).split() == ["2", "True"]
        r = cli(srv, "models", "show", "digits@1")
        assert r.returncode == 0 and "digits@1" in r.stdout and '"seed": 1' in r.stdout
        r = cli(srv, "models", "alias", "digits", "prod", "1")
        assert r.returncode == 0 and "digits@prod -> version 1" in r.stdout
        r = cli(srv, "models", "delete", "digits@2")
        assert r.returncode == 0, r.stderr
        r = cli(srv, "models", "list", "digits", "--json")
        assert [v["version"] for v in json.loads(r.stdout)] == [1]
    finally:
        srv.stop()


def test_serve_on_the_server_is_a_job_listed_and_stopped_like_any(tmp_path):
    home = str(tmp_path / "home")
    os.makedirs(home)
    srv = start_server(home, str(tmp_path / "storage"))
    try:
        script = MODEL_SRC + '''
import json
from tandem import model
m = DigitsMLP({"seed": 4})
ref = model.put(m, name="served")
np.save("expected.npy", m.predict(digits(5)).numpy())
h = model.serve(ref, serve_settings={"max_batch_size": 4, "batch_wait_ms": 2})
print(json.dumps({"url": h.url, "job_id": h.job_id}))
'''
        info = json.loads(check(run_script(script, str(tmp_path), srv.env())).strip()
                          .splitlines()[-1])
        # the client process has exited; the served model runs on the server
        wait_state(srv, info["job_id"], ("RUNNING",))
        import numpy as np
        from sklearn.datasets import load_digits

        X = load_digits().data.astype("float32")[:5] / 16.0
        r = httpx.post(info["url"] + "/predict", json={"inputs": X.tolist()}, timeout=30)
        assert r.status_code == 200
        np.testing.assert_allclose(r.json()["outputs"], np.load(tmp_path / "expected.npy"),
                                   atol=1e-5)
        r = cli(srv, "jobs", "list")
        line = next(ln for ln in r.stdout.splitlines() if info["job_id"] in ln)
        assert "RUNNING" in line and "serve:served@1" in line
        with srv.http() as c:
            used = c.get("/api/cluster").json()
        assert used["available"]["CPU"] == used["resources"]["CPU"] - 1
        r = cli(srv, "jobs", "stop", info["job_id"])
        assert r.returncode == 0, r.stderr
        wait_state(srv, info["job_id"], ("STOPPED",))
        port = int(info["url"].split(":")[2].split("/")[0])
        deadline = time.monotonic() + 10
        while True:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the port stayed in use"
            time.sleep(0.05)
        with srv.http() as c:
            used = c.get("/api/cluster").json()
        assert used["available"]["CPU"] == used["resources"]["CPU"]
        # `tandem serve` on the server: prints the URL and returns
        r = cli(srv, "serve", "served@1", "--port", "0", "--max-batch-size", "8")
        assert r.returncode == 0, r.stderr
        assert "serving served@1 at http://127.0.0.1:" in r.stdout
        assert "tandem jobs stop" in r.stdout
        job_id = r.stdout.split("(job ")[1].split(")")[0]
        assert cli(srv, "jobs", "stop", job_id).returncode == 0
        wait_state(srv, job_id, ("STOPPED",))
    finally:
        srv.stop()


@pytest.mark.postgres
def test_a_server_on_postgresql_keeps_its_registry_there(tmp_path, postgres_database_url):
    import sqlalchemy as sa

    home = str(tmp_path / "home")
    os.makedirs(home)
    srv = start_server(home, str(tmp_path / "storage"), None, "--db", postgres_database_url)
    try:
        putter = MODEL_SRC + '''
from tandem import model
print(model.put(DigitsMLP({"seed": 3}), name="pg"))
print(model.put(DigitsMLP({"seed": 4}), name="pg"))
'''
        assert check(run_script(putter, str(tmp_path), srv.env())).split() == ["pg@1", "pg@2"]
        getter = '''
from tandem import model
print(model.get("pg@1").config["seed"])
'''
        assert check(run_script(getter, str(tmp_path), srv.env())).strip() == "3"
    finally:
        srv.stop()
    engine = sa.create_engine(postgres_database_url.replace("postgresql://",
                                                            "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text(
                "SELECT name, version FROM tandem_model_versions ORDER BY version")).all()
    finally:
        engine.dispose()
    assert [tuple(r) for r in rows] == [("pg", 1), ("pg", 2)]
