"""Property-based fuzzing of the server in process (ASGI transport, no sockets): every
operation of its OpenAPI document, schemathesis-generated inputs plus deeply nested JSON
bodies (issue 23 item 4), never gets a 5xx; the registry's routes included."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tandem.server import ServerConfig, TrainServer, create_app

pytestmark = pytest.mark.timeout(180)

TOKEN = "fuzz-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    storage = tmp_path_factory.mktemp("fuzz-server")
    server = TrainServer(ServerConfig(storage=str(storage), num_cpus=1, usage_interval_s=0,
                                      max_upload_bytes=2**20))
    try:
        yield create_app(server, TOKEN)
    finally:
        server.close()


def _call(app, method: str, path: str, body: bytes) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://fuzz") as c:
            return await c.request(method, path, content=body,
                                   headers={**AUTH, "content-type": "application/json"})

    return asyncio.run(go())


def test_schemathesis_over_the_openapi_document_finds_no_5xx(app):
    schema = schemathesis.openapi.from_asgi("/openapi.json", app, headers=AUTH)
    failures: list[str] = []
    started = time.monotonic()
    n = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=20, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case):
            nonlocal n
            n += 1
            if "follow" in (case.query or {}):
                case.query["follow"] = "false"
            response = case.call(headers=AUTH)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} "
                                f"{case.body!r:.200} -> {response.status_code} "
                                f"{response.text[:300]}")

        check()
    assert n > 100
    assert not failures, "\n".join(failures)
    assert time.monotonic() - started < 90


def _nest(depth: int, leaf: str, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + leaf.encode() + b"]" * depth
    return b'{"a":' * depth + leaf.encode() + b"}" * depth


@settings(max_examples=30, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from([("POST", "/api/jobs"), ("POST", "/api/models/m/versions"),
                              ("PUT", "/api/models/m/aliases/a"),
                              ("POST", "/api/jobs/job_x/stop")]),
       depth=st.sampled_from([50, 900, 5_000, 200_000]),
       kind=st.sampled_from(["list", "dict"]),
       wrap=st.sampled_from(["{}", '{"meta": %s, "files": "AA=="}', '{"payload": %s}',
                             '{"version": %s}']))
def test_deeply_nested_json_is_a_4xx_on_every_body_route(app, route, depth, kind, wrap):
    inner = _nest(depth, "1", kind)
    body = inner if wrap == "{}" else (wrap % "X").encode().replace(b"X", inner)
    r = _call(app, *route, body)
    assert 400 <= r.status_code < 500, (route, depth, kind, wrap, r.status_code, r.text[:200])
