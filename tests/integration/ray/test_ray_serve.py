"""A model served on Ray: its replicas are Ray actors in the job's placement group."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

import tandem
from tandem import model
from tests.integration.registry._util import MODEL_SRC

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.ray_cluster]


def test_replicas_are_ray_actors_and_answer(tmp_path, monkeypatch):
    import ray

    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    ns: dict = {"__name__": "ray_serve_models"}
    exec(compile(MODEL_SRC, "ray_serve_models", "exec"), ns)  # noqa: S102 - a module in memory
    m = ns["DigitsMLP"]({"seed": 9})
    X = ns["digits"](40)
    ref = model.put(m, name="onray")
    tandem.init(cluster="ray")
    handle = model.serve(ref, serve_settings={"num_replicas": 2, "max_batch_size": 8,
                                              "batch_wait_ms": 2})
    try:
        assert handle.status()["replicas_ready"] == 2
        used = ray.available_resources().get("CPU", 0)
        assert used <= ray.cluster_resources()["CPU"] - 2  # the two bundles are held
        with httpx.Client(timeout=30) as c:
            outs = [c.post(handle.url + "/predict", json={"inputs": [x.tolist()]}).json()
                    ["outputs"][0] for x in X]
        np.testing.assert_allclose(outs, m.predict(X).numpy(), atol=1e-5)
    finally:
        handle.stop()
    assert handle.status()["state"] == "STOPPED"
