"""The token check in front of every request (an ASGI middleware, so that a request without
the token is refused before anything else runs: no body parsing, no validation)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any, Protocol
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool

COOKIE = "tandem_token"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    return secrets.token_urlsafe(32)


class Authenticator(Protocol):
    """Who a token belongs to (``tandem.server.users.AccountStore``)."""

    def authenticate(self, token: str | bytes | None) -> object: ...


USER_KEY = "tandem.user"  # the scope key holding the authenticated ``User`` (or None)


class TokenAuth:
    """Every HTTP request must carry ``Authorization: Bearer <token>``.

    Two exceptions, both for browsers: a GET may carry the token in the ``tandem_token``
    cookie (never a request that changes anything, so no cross-site request can stop a
    job), and the dashboard page ``/`` also takes it as ``?token=`` (and then sets the
    cookie).

    With ``accounts`` (a train server's ``AccountStore``), a token is any user's token
    (checked against its stored hash, off the event loop) and the request's scope carries
    the ``User`` under ``"tandem.user"``; without, ``token`` is the only one.
    """

    def __init__(self, app: ASGIApp, token: str, accounts: Authenticator | None = None) -> None:
        self.app = app
        self._token = token.encode()
        self._accounts = accounts

    def _ok(self, given: str | bytes | None) -> bool:
        if not given:
            return False
        if isinstance(given, str):
            given = given.encode("utf-8", "replace")
        return secrets.compare_digest(given, self._token)

    def candidates(self, scope: Scope) -> list[bytes]:
        """The tokens a request offers, in the order they are tried."""
        out: list[bytes] = []
        headers = dict(scope.get("headers") or [])
        auth = headers.get(b"authorization", b"")
        if auth[:7].lower() == b"bearer " and auth[7:].strip():
            out.append(auth[7:].strip())
        if scope.get("method") not in ("GET", "HEAD"):
            return out
        raw_cookie = headers.get(b"cookie")
        if raw_cookie:
            try:
                c = SimpleCookie(raw_cookie.decode("latin-1"))
                if COOKIE in c and c[COOKIE].value:
                    out.append(c[COOKIE].value.encode("utf-8", "replace"))
            except Exception:  # noqa: BLE001 - a malformed cookie header is no token
                pass
        if scope.get("path") == "/":
            qs = parse_qs((scope.get("query_string") or b"").decode("latin-1"))
            out.extend(t.encode("utf-8", "replace") for t in qs.get("token", [])[:4] if t)
        return out

    def allowed(self, scope: Scope) -> bool:
        return any(self._ok(t) for t in self.candidates(scope))

    async def user_of(self, scope: Scope) -> object:
        """The authenticated user (``accounts``), True (the one token), or None."""
        for t in self.candidates(scope):
            if self._ok(t):
                if self._accounts is None:
                    return True
                return self._accounts.authenticate(t)  # the admin: no database read
            if self._accounts is not None:
                user = await run_in_threadpool(self._accounts.authenticate, t)
                if user is not None:
                    return user
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            user = await self.user_of(scope)
        except Exception as e:  # noqa: BLE001 - the users' table is unreachable
            down = json.dumps({"detail": f"cannot check the token now: {e} Retry later."})
            await send({"type": "http.response.start", "status": 503,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", str(len(down.encode())).encode())]})
            await send({"type": "http.response.body", "body": down.encode()})
            return
        if user is not None:
            if self._accounts is not None:
                scope = {**scope, USER_KEY: user}
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
