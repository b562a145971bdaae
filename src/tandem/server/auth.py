"""The token check in front of every request (an ASGI middleware, so that a request without
the token is refused before anything else runs: no body parsing, no validation)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qs

COOKIE = "tandem_token"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
ASGIApp = Callable[
    [Scope, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]
]


def new_token() -> str:
    return secrets.token_urlsafe(32)


class TokenAuth:
    """Every HTTP request must carry ``Authorization: Bearer <token>``.

    Two exceptions, both for browsers: a GET may carry the token in the ``tandem_token``
    cookie (never a request that changes anything, so no cross-site request can stop a
    job), and the dashboard page ``/`` also takes it as ``?token=`` (and then sets the
    cookie).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self._token = token.encode()

    def _ok(self, given: str | bytes | None) -> bool:
        if not given:
            return False
        if isinstance(given, str):
            given = given.encode("utf-8", "replace")
        return secrets.compare_digest(given, self._token)

    def allowed(self, scope: Scope) -> bool:
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer " and self._ok(auth[7:].strip()):
            return True
        if scope.get("method") not in ("GET", "HEAD"):
            return False
        raw_cookie = headers.get(b"cookie")
        if raw_cookie:
            try:
                c = SimpleCookie(raw_cookie.decode("latin-1"))
                if COOKIE in c and self._ok(c[COOKIE].value):
                    return True
            except Exception:  # noqa: BLE001 - a malformed cookie header is no token
                pass
        if scope.get("path") == "/":
            qs = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
            if any(self._ok(t) for t in qs.get("token", [])):
                return True
        return False

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({
            "detail": "missing or wrong token: send the header 'Authorization: Bearer <token>'. "
                      "A local server writes its token to ~/.tandem/server.json; clients read it "
                      "from there, from TANDEM_TOKEN, or from tandem.init(token=...)."
        }).encode()
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b"Bearer")],
        })
        await send({"type": "http.response.body", "body": body})
