"""The client raises one class per HTTP error status, from the code (never from the text),
keeping the classes callers caught before (404 -> JobNotFoundError, 413/422 -> ConfigError).

The server side is httpx's own MockTransport: what is tested is our mapping, through a real
httpx client."""

from __future__ import annotations

import httpx
import pytest

from tandem._core.errors import ConfigError, JobNotFoundError, TandemError
from tandem.jobs.client import (
    BadRequest,
    Conflict,
    Forbidden,
    NotFound,
    PayloadTooLarge,
    ServerConnection,
    ServerHTTPError,
    ServerInternalError,
    ServiceUnavailable,
    TooManyRequests,
    Unauthorized,
    UnprocessableEntity,
)


def _connection(status: int, body: object) -> ServerConnection:
    conn = ServerConnection("http://tandem.test", token="t")
    conn.http = httpx.Client(base_url=conn.url, transport=httpx.MockTransport(
        lambda request: httpx.Response(status, json=body) if not isinstance(body, str)
        else httpx.Response(status, text=body)))
    return conn


@pytest.mark.parametrize(("status", "cls", "also"), [
    (400, BadRequest, ()),
    (401, Unauthorized, ()),
    (403, Forbidden, ()),
    (404, NotFound, (JobNotFoundError,)),
    (409, Conflict, ()),
    (413, PayloadTooLarge, (ConfigError,)),
    (422, UnprocessableEntity, (ConfigError,)),
    (429, TooManyRequests, ()),
    (500, ServerInternalError, ()),
    (502, ServerInternalError, ()),
    (503, ServiceUnavailable, ()),
    (418, ServerHTTPError, ()),
])
def test_each_error_status_raises_its_class_with_the_servers_detail(status, cls, also):
    conn = _connection(status, {"detail": "409: not a status, only words"})
    with pytest.raises(ServerHTTPError) as info:
        conn.json("GET", "/api/x")
    err = info.value
    assert type(err) is cls and isinstance(err, (TandemError, *also))
    assert err.status == status and err.url == "http://tandem.test"
    assert err.detail == "409: not a status, only words"  # the text never decides the class
    assert "409: not a status, only words" in str(err)
    if status in (404, 413, 422):
        assert str(err) == err.detail  # the messages callers saw before
    elif status == 401:
        assert "tandem.init(token=...)" in str(err)
    else:
        assert str(err).startswith(f"the tandem server at http://tandem.test answered {status}:")


def test_validation_errors_and_non_json_bodies_become_readable_details():
    conn = _connection(422, {"detail": [{"loc": ["body", "version"], "msg": "not an int"}]})
    with pytest.raises(UnprocessableEntity, match=r"^body\.version: not an int$"):
        conn.json("POST", "/api/x")
    with pytest.raises(ServiceUnavailable) as info:
        _connection(503, "starting").json("GET", "/api/x")
    assert info.value.detail == "starting"
    assert _connection(200, {"ok": True}).json("GET", "/api/x") == {"ok": True}
