"""The serving front under hypothesis (issue 23 items 4 and 7), in process: the real ASGI app
(``ServeApp``), the real batcher (``Front``) and the real replica answer code
(``ReplicaTask._answer``) around a small NumPy model; only the process boundary between
front and replica is an in-process call. No input gets a 5xx; booleans, NaN, infinities
and numbers too large to be finite are 422s; deep nesting is a 400; a request larger
than max_batch_size is split into batches; an exposed model needs its key."""

from __future__ import annotations

import asyncio
import json

import httpx
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tandem.model.serve._front import Front, ServeApp
from tandem.model.serve._replica import ReplicaTask

W = np.arange(12, dtype=np.float32).reshape(4, 3) / 10.0
KEY = "k" * 24


class _InProcessReplica:
    """Carries a batch to the replica's answer code and the result back on the loop."""

    def __init__(self, front: Front, loop: asyncio.AbstractEventLoop) -> None:
        self.front, self.loop = front, loop
        self.task = ReplicaTask("unused", "m@1")

    def send(self, msg: tuple) -> None:
        if msg[0] != "batch":
            return
        _, bid, requests, offsets = msg
        with np.errstate(all="ignore"):  # 1e30 overflows float32: answered as null
            out = self.task._answer(lambda xs: np.asarray(xs, dtype=np.float32) @ W,
                                    requests, (4,), True, "f", offsets)
        self.loop.call_soon(self.front.on_frame, 0, 0, ("out", bid, out))


def _run(requests: list[tuple[str, str, bytes | None, dict]], max_batch: int = 8,
         key: str | None = None) -> tuple[list[httpx.Response], Front]:
    async def go() -> tuple[list[httpx.Response], Front]:
        loop = asyncio.get_running_loop()
        front = Front(loop, 1, max_batch, 0.0, 10.0, 10_000, lambda *a: None)
        front.attach(0, _InProcessReplica(front, loop), 0)
        front.on_frame(0, 0, ("ready", {"pid": 1, "item_shape": [4]}))
        app = ServeApp("/m", lambda: {"name": "m"}, lambda: front, 2**20, api_key=key)
        transport = httpx.ASGITransport(app=app)
        out = []
        async with httpx.AsyncClient(transport=transport, base_url="http://m") as c:
            for method, path, body, headers in requests:
                out.append(await c.request(method, path, content=body, headers=headers))
        front.close()
        return out, front

    return asyncio.run(go())


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-10**30, 10**30),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5))
json_value = st.recursive(json_leaf, lambda kids: st.lists(kids, max_size=6)
                          | st.dictionaries(st.text(max_size=4), kids, max_size=4),
                          max_leaves=40)


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(body=st.one_of(
    json_value.map(lambda v: json.dumps({"inputs": v}).encode()),
    json_value.map(lambda v: json.dumps(v).encode()),
    st.lists(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=4,
                      max_size=4), min_size=1, max_size=30)
      .map(lambda v: json.dumps({"inputs": v}).encode()),
    st.binary(max_size=64)),
    path=st.sampled_from(["/m/predict", "/m", "/m/health", "/m/ready", "/x", "/m/predict/"]),
    method=st.sampled_from(["POST", "GET", "PUT", "DELETE"]))
def test_no_request_gets_a_5xx(body, path, method):
    (r,), _ = _run([(method, path, body, {"content-type": "application/json"})])
    assert r.status_code < 500, (method, path, body[:200], r.status_code, r.text[:300])
    json.loads(r.content)  # always JSON (no NaN)


def test_non_numbers_and_deep_nesting_are_4xx_and_the_next_request_is_answered():
    ok = json.dumps({"inputs": [[1, 2, 3, 4]]}).encode()
    bodies = [
        b'{"inputs": [[1, 2, true, 4]]}',
        b'{"inputs": [[1, 2, NaN, 4]]}',
        b'{"inputs": [[1, 2, Infinity, 4]]}',
        b'{"inputs": [[1, 2, -Infinity, 4]]}',
        b'{"inputs": [[1, 2, 1e999, 4]]}',
        b'{"inputs": [[1, 2, "3", 4]]}',
        b'{"inputs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"inputs": [' + b'{"a":' * 5_000 + b"1" + b"}" * 5_000 + b"]}",
    ]
    reqs = []
    for b in bodies:
        reqs += [("POST", "/m/predict", b, {}), ("POST", "/m/predict", ok, {})]
    rs, _ = _run(reqs)
    codes = [r.status_code for r in rs]
    assert codes == [422, 200] * 6 + [400, 200] * 2, [(c, r.text[:80]) for c, r in
                                                      zip(codes, rs)]
    assert "inputs[0][2] is a boolean" in rs[0].json()["detail"]
    assert "NaN" in rs[2].json()["detail"] and "Infinity" in rs[4].json()["detail"]
    assert "too large to be finite" in rs[8].json()["detail"]
    assert "nested too deeply" in rs[12].json()["detail"]


def test_a_request_larger_than_max_batch_size_is_split_in_order():
    x = np.random.default_rng(0).normal(size=(1000, 4)).round(3)
    wrong = x.tolist()
    wrong[37] = [1.0, 2.0, "x", 4.0]  # found by the replica, in the third batch
    rs, front = _run([("POST", "/m/predict", json.dumps({"inputs": x.tolist()}).encode(), {}),
                      ("POST", "/m/predict", json.dumps({"inputs": wrong}).encode(), {})],
                     max_batch=16)
    assert rs[1].status_code == 422 and "inputs[37] is not an array of numbers" in rs[1].text, rs[1].text
    assert rs[0].status_code == 200, rs[0].text
    np.testing.assert_allclose(rs[0].json()["outputs"], x @ W, rtol=1e-4, atol=1e-4)
    assert front.largest_batch == 16 and front.batches >= 63  # ceil(1000 / 16) each


def test_an_exposed_model_needs_its_key():
    ok = json.dumps({"inputs": [[1, 2, 3, 4]]}).encode()
    rs, _ = _run([("POST", "/m/predict", ok, {}),
                  ("GET", "/m", None, {"Authorization": "Bearer wrong"}),
                  ("POST", "/m/predict", ok, {"Authorization": f"Bearer {KEY}"})], key=KEY)
    assert [r.status_code for r in rs] == [401, 401, 200]
    assert "Authorization: Bearer" in rs[0].json()["detail"]
