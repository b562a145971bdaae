"""Serving starts warm (issue 25, item 2): the replicas fork from a launcher that has the
model's framework imported, and a second deployment of the same registered version starts
on the replica process the first one left in the warm pool, with its weights loaded."""

from __future__ import annotations

import httpx
import numpy as np
import psutil
import pytest

import tandem
from tandem import model
from tandem.model.serve import ServeError
from tests.integration.registry._util import predict, put_digits

pytestmark = pytest.mark.slow


@pytest.fixture
def two_versions(tmp_path, monkeypatch):
    versions, ns = put_digits(tmp_path, monkeypatch, "serve_warm_models", seeds=(5, 6))
    return versions, ns["digits"](8)


def test_a_second_deployment_of_a_version_starts_on_its_warm_replica(two_versions):
    [(ref1, m1), (ref2, m2)], X = two_versions
    tandem.init(num_cpus=2)
    cluster = tandem.jobs.get_service().cluster

    first = model.serve(ref1)
    pid = list(first.status()["pids"].values()).pop()
    got1 = predict(first, X)
    info1 = httpx.get(first.url).json()
    first.stop()
    # the replica's process waits in the warm pool, its CPU given back
    assert pid in cluster.warm_worker_pids()
    assert cluster.available()["CPU"] == 2
    # ... where the launcher had imported the model's framework before forking replicas
    assert {"torch", "tandem.model.serve._replica"} <= set(cluster._io._preloaded)

    again = model.serve(ref1)
    try:
        assert list(again.status()["pids"].values()).pop() == pid  # the same process
        info2 = httpx.get(again.url).json()
        np.testing.assert_allclose(predict(again, X), got1, atol=1e-6)
    finally:
        again.stop()
    assert info1["replicas_warm"] == 0 and info2["replicas_warm"] == 1  # weights reused
    assert info2["replica_devices"] == ["cpu"]
    np.testing.assert_allclose(got1, m1.predict(X).numpy(), atol=1e-5)

    # another version never gets that process's weights
    other = model.serve(ref2)
    try:
        assert list(other.status()["pids"].values()).pop() != pid
        assert httpx.get(other.url).json()["replicas_warm"] == 0
        np.testing.assert_allclose(predict(other, X), m2.predict(X).numpy(), atol=1e-5)
    finally:
        other.stop()


def test_a_replica_on_a_declared_gpu_gets_its_device_and_says_when_torch_has_no_cuda(
        two_versions):
    """A cluster declaring a GPU (none here): the replica is placed on it, sees it through
    CUDA_VISIBLE_DEVICES, and since this torch has no CUDA the served job fails with the
    replica's own reason (on a GPU machine, tests/gpu/test_gpu.py serves on cuda)."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: tests/gpu/test_gpu.py covers it")
    [(ref1, _), _], _ = two_versions
    tandem.init(num_cpus=2, num_gpus=1)
    svc = tandem.jobs.get_service()
    with pytest.raises(ServeError) as e:
        model.serve(ref1, num_gpus=1, serve_settings={"max_restarts": 0})
    assert "CUDA_VISIBLE_DEVICES='0'" in str(e.value)
    assert "torch cannot use CUDA here" in str(e.value)
    assert svc.cluster.available()["GPU"] == 1  # given back
    assert not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                   for p in map(psutil.Process, svc.cluster.live_worker_pids()))


def test_deployments_of_one_process_share_one_http_server(two_versions):
    from tandem._core.errors import ConfigError
    from tandem.model.serve._shared import front

    [(ref1, m1), (ref2, m2)], X = two_versions
    tandem.init(num_cpus=2)
    a = model.serve(ref1, serve_settings={"route_prefix": "/a"})
    try:
        b = model.serve(ref2, serve_settings={"route_prefix": "/b"})
        try:
            port = a.url.split(":")[2].split("/")[0]
            assert b.url == f"http://127.0.0.1:{port}/b"  # one listening server ...
            (listener,) = front().listeners.values()
            assert listener.starts == 1 and sorted(listener.routes) == ["/a", "/b"]
            # ... each route answering with its own model, replies as before
            np.testing.assert_allclose(predict(a, X), m1.predict(X).numpy(), atol=1e-5)
            np.testing.assert_allclose(predict(b, X), m2.predict(X).numpy(), atol=1e-5)
            r = httpx.get(f"http://127.0.0.1:{port}/c/predict")
            assert r.status_code == 404 and "/a (serve:digits@1)" in r.json()["detail"]
            with pytest.raises(ConfigError, match="route_prefix '/a' is served already"):
                model.serve(ref2, serve_settings={"route_prefix": "/a"})
        finally:
            b.stop()
        np.testing.assert_allclose(predict(a, X), m1.predict(X).numpy(), atol=1e-5)
    finally:
        a.stop()
    assert front().listeners == {}
    with pytest.raises(httpx.ConnectError):
        httpx.get(a.url)
