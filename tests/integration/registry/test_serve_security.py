"""A served model gets the server's rules (issue 23 items 6 and 7), with real replicas:
loopback unless ``expose=True``; exposed, every request needs the key; inputs checked;
a request larger than ``max_batch_size`` is split; the served version cannot be deleted."""

from __future__ import annotations

import httpx
import numpy as np
import pytest

from tandem import model
from tandem._core.errors import ConfigError
from tandem.model.registry import RegistryError
from tests.integration.registry.test_serve import registered  # noqa: F401 - a fixture

pytestmark = pytest.mark.slow


def test_exposed_serving_needs_its_key_checks_inputs_splits_and_pins_its_version(
        registered):  # noqa: F811
    ref, m, X = registered
    with pytest.raises(ConfigError, match="needs expose=True"):
        model.serve(ref, serve_settings={"host": "0.0.0.0"})
    handle = model.serve(ref, serve_settings={"host": "0.0.0.0", "expose": True,
                                              "max_batch_size": 16})
    try:
        key = handle.api_key
        assert key and len(key) >= 32
        u = handle.url
        with httpx.Client(timeout=60) as c:
            one = {"inputs": [X[0].tolist()]}
            assert c.post(u + "/predict", json=one).status_code == 401
            assert c.get(u, headers={"Authorization": "Bearer nope"}).status_code == 401
            auth = {"Authorization": f"Bearer {key}"}
            r = c.post(u + "/predict", json=one, headers=auth)
            assert r.status_code == 200, r.text
            # an unknown route on the shared port names no route without the key
            other = u.rsplit("/", 1)[0] + "/other"
            assert c.get(other).status_code == 401
            assert c.get(other, headers=auth).status_code == 404
            bad = X[0].tolist()
            for token, what in (("true", "boolean"), ("NaN", "NaN"),
                                ("Infinity", "Infinity"), ("1e999", "finite")):
                row = ", ".join([token] + [str(v) for v in bad[1:]])
                body = f'{{"inputs": [[{row}]]}}'
                r = c.post(u + "/predict", content=body, headers=auth)
                assert r.status_code == 422 and what in r.json()["detail"], r.text
            r = c.post(u + "/predict", content=b'{"inputs": ' + b"[" * 50_000 + b"]" * 50_000
                       + b"}", headers=auth)
            assert r.status_code == 400, r.text
            big = np.tile(X, (10, 1))[:2000]  # 2000 inputs in one request
            r = c.post(u + "/predict", json={"inputs": big.tolist()}, headers=auth)
            assert r.status_code == 200, r.text
            np.testing.assert_allclose(r.json()["outputs"], m.predict(big).numpy(), atol=1e-5)
            info = c.get(u, headers=auth).json()
            assert info["largest_batch"] <= 16 and info["batches"] >= 2000 // 16, info
        with pytest.raises(RegistryError, match=f"served by job {handle.job_id}"):
            model.delete("digits", ref.version)
        assert [v["version"] for v in model.list("digits")] == [ref.version]
    finally:
        handle.stop()
    model.delete("digits", ref.version)  # no longer served
