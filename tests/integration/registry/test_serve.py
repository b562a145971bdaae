"""Serving a registered model as a job: HTTP, batching, replica death, stop, bad input."""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np
import psutil
import pytest

import tandem
from tandem import model
from tandem._core.errors import ConfigError
from tandem.model.registry import ModelNotFoundError
from tandem.model.serve import ServeError
from tests.integration.registry._util import models_namespace, put_digits

pytestmark = pytest.mark.slow


@pytest.fixture
def registered(tmp_path, monkeypatch):
    [(ref, m)], ns = put_digits(tmp_path, monkeypatch, "serve_test_models")
    tandem.init(num_cpus=2)
    return ref, m, ns["digits"](200)


def test_200_concurrent_requests_with_batching_equal_local_predict(registered):
    ref, m, X = registered
    handle = model.serve(ref, serve_settings={"max_batch_size": 16, "batch_wait_ms": 5})
    try:
        expected = m.predict(X).numpy()
        with httpx.Client(timeout=30, limits=httpx.Limits(max_connections=64)) as c:
            def one(i: int) -> list:
                r = c.post(handle.url + "/predict", json={"inputs": [X[i].tolist()]})
                assert r.status_code == 200, r.text
                return r.json()["outputs"][0]

            with ThreadPoolExecutor(64) as pool:
                got = np.array(list(pool.map(one, range(200))))
            info = c.get(handle.url).json()
        np.testing.assert_allclose(got, expected, atol=1e-5)
        assert info["name"] == "digits" and info["version"] == 1
        assert info["config"] == {"hidden": 32, "seed": 5}
        assert info["requests"] == 200
        assert info["batches"] < 200, info  # requests were batched together
        assert info["largest_batch"] <= 16
    finally:
        handle.stop()


def _replica_pids(handle) -> list[int]:
    return [int(p) for p in handle.status()["pids"].values()]


def test_a_replica_killed_mid_load_loses_no_request_and_comes_back(registered):
    ref, m, X = registered
    handle = model.serve(ref, serve_settings={"max_batch_size": 8, "batch_wait_ms": 1})
    try:
        (pid,) = _replica_pids(handle)
        codes: list[int] = []
        wrong: list[int] = []
        expected = m.predict(X).numpy()
        stop = threading.Event()

        def client(k: int) -> None:
            with httpx.Client(timeout=60) as c:
                i = k
                while not stop.is_set():
                    r = c.post(handle.url + "/predict", json={"inputs": [X[i % 200].tolist()]})
                    codes.append(r.status_code)
                    if r.status_code == 200 and not np.allclose(
                            r.json()["outputs"][0], expected[i % 200], atol=1e-5):
                        wrong.append(i)
                    i += 8

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(codes) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            st = handle.status()
            if st.get("restarts", 0) >= 1 and st.get("replicas_ready") == 1:
                break
            time.sleep(0.05)
        n_at_restart = len(codes)
        deadline = time.monotonic() + 30
        while len(codes) < n_at_restart + 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        stop.set()
        for t in threads:
            t.join(60)
        st = handle.status()
        assert st["restarts"] == 1 and st["replicas_ready"] == 1
        assert _replica_pids(handle) != [pid]
        assert set(codes) <= {200, 503}, sorted(set(codes))
        assert codes.count(200) >= n_at_restart - 8 + 100 - 8  # it answers again
        assert not wrong
    finally:
        handle.stop()


def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def test_stop_frees_the_port_the_resources_and_the_processes(registered):
    ref, _, _ = registered
    svc = tandem.jobs.get_service()
    before = svc.cluster.available()
    handle = model.serve(ref, serve_settings={"num_replicas": 2,
                                              "resources_per_replica": {"CPU": 1}})
    port = int(handle.url.split(":")[2].split("/")[0])
    assert handle.url == f"http://127.0.0.1:{port}/digits"
    assert svc.cluster.available()["CPU"] == before["CPU"] - 2
    listed = {j.job_id: (j.name, j.status()) for j in tandem.jobs.list()}
    assert listed[handle.job_id] == ("serve:digits@1", "RUNNING")
    pids = _replica_pids(handle)
    assert len(pids) == 2 and all(psutil.pid_exists(p) for p in pids)
    assert httpx.get(handle.url + "/ready").json() == {"ready": True, "replicas_ready": 2,
                                                       "replicas": 2}
    handle.stop()
    assert handle.status()["state"] == "STOPPED"
    assert svc.cluster.available() == before
    assert _port_free(port)
    # a replica's process has ended, or waits in the warm pool for the next deployment of
    # this version (docs/warm_workers.md); it holds no resources there, and leaves with
    # the pool (idle_s, tandem.shutdown())
    def running() -> list[int]:
        pooled = set(svc.cluster.warm_worker_pids())
        return [p for p in pids if psutil.pid_exists(p) and p not in pooled
                and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]

    deadline = time.monotonic() + 10
    while running() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not running()
    tandem.shutdown()
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
                   for p in pids)
    with pytest.raises(httpx.ConnectError):
        httpx.get(handle.url)


def test_a_port_in_use_is_refused_before_anything_starts(registered):
    ref, _, _ = registered
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        with pytest.raises(ConfigError, match=rf"port {port} on 127.0.0.1 is in use"):
            model.serve(ref, serve_settings={"port": port})
    assert [j for j in tandem.jobs.list() if j.name.startswith("serve:")] == []
    with pytest.raises(ConfigError, match="unknown keys \\['replicas'\\]"):
        model.serve(ref, serve_settings={"replicas": 2})
    with pytest.raises(ModelNotFoundError, match="has no version 7"):
        model.serve("digits@7")


def test_malformed_requests_get_clear_4xx(registered):
    ref, _, X = registered
    handle = model.serve(ref, serve_settings={"max_request_bytes": 100_000,
                                              "route_prefix": "/api/v1/digits"})
    try:
        u = handle.url
        assert u.endswith("/api/v1/digits")
        with httpx.Client(timeout=30) as c:
            r = c.post(u + "/predict", content=b"{not json")
            assert r.status_code == 400 and "not JSON" in r.json()["detail"]
            r = c.post(u + "/predict", json=[1, 2])
            assert r.status_code == 422 and 'must be {"inputs"' in r.json()["detail"]
            r = c.post(u + "/predict", json={"inputs": []})
            assert r.status_code == 422 and "non-empty list" in r.json()["detail"]
            r = c.post(u + "/predict", json={"inputs": [[1.0, 2.0]]})
            assert r.status_code == 422
            assert r.json()["detail"] == ("inputs[0] has shape [2]; the model expects each "
                                          "input to have shape [64] (from its example_input).")
            r = c.post(u + "/predict", json={"inputs": [X[0].tolist(), ["a"] * 64]})
            assert r.status_code == 422 and "inputs[1]" in r.json()["detail"]
            r = c.post(u + "/predict", json={"inputs": [[0.0] * 64] * 1000})
            assert r.status_code == 413 and "max_request_bytes" in r.json()["detail"]
            r = c.get(u + "/predict")
            assert r.status_code == 405
            r = c.get(u + "/nothing")
            assert r.status_code == 404 and "/api/v1/digits/predict" in r.json()["detail"]
            r = c.post(u + "/predict", json={"inputs": [X[0].tolist()]})
            assert r.status_code == 200 and len(r.json()["outputs"][0]) == 10
            assert c.get(u + "/health").json() == {"status": "ok"}
    finally:
        handle.stop()


def test_a_model_its_replicas_cannot_load_fails_with_their_error(registered, tmp_path):
    ref, _, _ = registered
    from tandem.model.registry import registry

    record = registry().resolve(ref)
    os.remove(os.path.join(record.location, "model.pt"))  # the weights vanished
    with pytest.raises(ServeError, match=r"(?s)replica 0 could not load the model \(2 tries\)"
                                         r".*no model\.pt there"):
        model.serve(ref, serve_settings={"max_restarts": 1}, ready_timeout_s=60)
    assert tandem.jobs.list()[-1].status() == "FAILED"


def test_a_replica_that_crashes_while_loading_fails_the_job_after_max_restarts(
        registered, tmp_path):
    marker = tmp_path / "crash-now"
    ns = models_namespace("crash_models", f'''
import os


class CrashingMLP(DigitsMLP):
    def setup(self):
        if os.path.exists({str(marker)!r}):
            os._exit(3)  # the process dies, no exception to report
        super().setup()
''')
    ref = model.put(ns["CrashingMLP"](), name="crashing")
    marker.write_text("")
    with pytest.raises(ServeError, match=r"replica 0 died 3 times before it was ready; its "
                                         r"output is in .*replica_0\.log"):
        model.serve(ref, serve_settings={"max_restarts": 2}, ready_timeout_s=90)
    (job,) = [j for j in tandem.jobs.list() if j.name == "serve:crashing@1"]
    assert job.status() == "FAILED"
