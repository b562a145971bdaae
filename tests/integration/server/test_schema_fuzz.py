"""schemathesis against the server's OpenAPI schema: no input gives a 500, and every answer
is one the schema documents (the 401/404/409/413/422/503s included).

schemathesis is in the dev extra, which CI installs (`.ci/run`): this test is never skipped.
"""

from __future__ import annotations

import time

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings

pytestmark = pytest.mark.timeout(120)


def test_no_input_makes_the_server_fail(server):
    auth = {"Authorization": f"Bearer {server.token}"}
    schema = schemathesis.openapi.from_url(f"{server.url}/openapi.json", headers=auth)
    failures: list[str] = []
    undocumented: set[str] = set()
    started = time.monotonic()
    n = 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @settings(max_examples=25, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def check(case):
            nonlocal n
            n += 1
            if "follow" in (case.query or {}):
                case.query["follow"] = "false"  # a followed log of a real job never ends early
            response = case.call(base_url=server.url, headers=auth, timeout=10)
            if response.status_code >= 500:
                failures.append(f"{case.method} {case.formatted_path} {case.query} {case.body!r:.200}"
                                f" -> {response.status_code} {response.text[:300]}")
            if str(response.status_code) not in case.operation.definition.raw["responses"]:
                undocumented.add(f"{case.method} {case.operation.path} -> {response.status_code}")

        check()
    assert n > 100
    assert not failures, "\n".join(failures)
    assert not undocumented, sorted(undocumented)
    assert time.monotonic() - started < 60
    assert "Traceback" not in server.log_text()


def test_deep_json_is_a_400_and_the_keep_alive_connection_survives(server):
    """Issue 23 item 4: RecursionError was a 500 and reset the connection."""
    deep = b'{"meta": ' + b"[" * 100_000 + b"]" * 100_000 + b', "files": "AA=="}'
    with server.http() as c:
        ports = []
        for method, path, body in (("POST", "/api/models/m/versions", deep),
                                   ("GET", "/api/health", None),
                                   ("POST", "/api/jobs", deep),
                                   ("GET", "/api/health", None)):
            r = c.request(method, path, content=body,
                          headers={"content-type": "application/json"})
            assert r.status_code == (200 if method == "GET" else 400), r.text
            ports.append(r.extensions["network_stream"].get_extra_info("client_addr")[1])
        assert len(set(ports)) == 1, ports  # one connection throughout
    assert "Traceback" not in server.log_text()
