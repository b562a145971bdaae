"""The dashboard's login gate: HttpOnly cookie, no token in URLs, CSRF on writes."""

from __future__ import annotations

import asyncio
from typing import Any

from tandem.server.dashboard.gate import DashboardGate, LoginLimiter, csrf_value, static_file

TOKEN = "s3cret-token"


class Inner:
    """Stands for TokenAuth + the app: records what reached it."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        self.seen.append(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"inner"})


def call(gate: DashboardGate, path: str, method: str = "GET", headers: dict | None = None,
         body: bytes = b"") -> tuple[int, dict[bytes, list[bytes]], bytes]:
    sent: list[dict] = []
    scope = {"type": "http", "path": path, "method": method, "query_string": b"",
             "headers": [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]}

    async def receive() -> dict:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(msg: dict) -> None:
        sent.append(msg)

    asyncio.run(gate(scope, receive, send))
    hdrs: dict[bytes, list[bytes]] = {}
    for k, v in sent[0].get("headers", []):
        hdrs.setdefault(k, []).append(v)
    return sent[0]["status"], hdrs, b"".join(m.get("body", b"") for m in sent[1:])


def test_login_sets_httponly_cookie_and_redirects_without_token_in_url():
    inner = Inner()
    gate = DashboardGate(inner, TOKEN)
    status, h, _ = call(gate, "/")
    assert (status, h[b"location"]) == (303, [b"/login"])
    status, h, body = call(gate, "/login")
    assert status == 200 and b'name="token"' in body and b"script-src 'self'" in h[
        b"content-security-policy"][0]
    status, _, body = call(gate, "/login", "POST", {"host": "h:1", "origin": "http://h:1"},
                           b"token=wrong")
    assert status == 401 and b"not this server" in body
    status, h, _ = call(gate, "/login", "POST", {"host": "h:1", "origin": "http://h:1"},
                        f"token={TOKEN}".encode())
    assert status == 303 and h[b"location"] == [b"/"]
    cookies = b"\n".join(h[b"set-cookie"]).decode()
    assert f"tandem_token={TOKEN}; Path=/; SameSite=Strict; HttpOnly" in cookies
    assert f"tandem_csrf={csrf_value(TOKEN)}; Path=/; SameSite=Strict" in cookies
    assert TOKEN not in h[b"location"][0].decode()
    assert not inner.seen  # nothing behind the gate saw any of this


def test_cross_site_login_and_writes_are_refused():
    inner = Inner()
    gate = DashboardGate(inner, TOKEN)
    evil = {"host": "h:1", "origin": "http://evil.example"}
    assert call(gate, "/login", "POST", evil, f"token={TOKEN}".encode())[0] == 403
    cookie = {"cookie": f"tandem_token={TOKEN}", "host": "h:1"}
    # a cross-site form can send the cookie (were it not SameSite) but not the header
    assert call(gate, "/api/jobs/j/stop", "POST", cookie)[0] == 403
    assert call(gate, "/api/jobs/j/stop", "POST",
                {**cookie, "x-tandem-csrf": "guess", "origin": "http://h:1"})[0] == 403
    assert call(gate, "/api/jobs/j/stop", "POST",
                {**cookie, "x-tandem-csrf": csrf_value(TOKEN), "origin": "http://evil"})[0] == 403
    assert call(gate, "/logout", "POST", evil)[0] == 403
    assert not inner.seen


def test_a_dashboard_write_reaches_the_app_with_the_token():
    inner = Inner()
    gate = DashboardGate(inner, TOKEN)
    status, _, body = call(gate, "/api/jobs/j/stop", "POST", {
        "cookie": f"tandem_token={TOKEN}", "host": "h:1", "origin": "http://h:1",
        "x-tandem-csrf": csrf_value(TOKEN)})
    assert (status, body) == (200, b"inner")
    assert (b"authorization", f"Bearer {TOKEN}".encode()) in inner.seen[0]["headers"]
    # reads and API clients pass through untouched (the token check behind decides)
    call(gate, "/api/jobs", "GET", {"authorization": "Bearer x"})
    assert (b"authorization", b"Bearer x") in inner.seen[1]["headers"]
    status, h, _ = call(gate, "/logout", "POST", {"host": "h:1", "origin": "http://h:1"})
    assert status == 303 and all(b"Max-Age=0" in c for c in h[b"set-cookie"])


def test_static_files_ship_in_the_package():
    gate = DashboardGate(Inner(), TOKEN)
    for name in ("app.js", "app.css", "uPlot.iife.min.js", "uPlot.min.css", "login.js"):
        status, h, body = call(gate, f"/dashboard/static/{name}")
        assert status == 200 and len(body) > 100, name
        assert h[b"x-content-type-options"] == [b"nosniff"]
    assert b"MIT License" in (static_file("uPlot.LICENSE") or b"")
    assert call(gate, "/dashboard/static/../gate.py")[0] == 404
    assert call(gate, "/dashboard/static/.hidden")[0] == 404
    assert call(gate, "/dashboard/static/nope.js")[0] == 404
    page = (static_file("app.html") or b"").decode()
    assert "http://" not in page and "https://" not in page  # nothing from elsewhere


def _login(gate: DashboardGate, token: str, scheme: str = "http",
           client: str = "10.0.0.1") -> tuple[int, dict[bytes, list[bytes]]]:
    sent: list[dict] = []
    scope = {"type": "http", "path": "/login", "method": "POST", "query_string": b"",
             "scheme": scheme, "client": (client, 5555),
             "headers": [(b"content-type", b"application/x-www-form-urlencoded")]}

    async def receive() -> dict:
        return {"type": "http.request", "body": f"token={token}".encode(), "more_body": False}

    async def send(msg: dict) -> None:
        sent.append(msg)

    asyncio.run(gate(scope, receive, send))
    hdrs: dict[bytes, list[bytes]] = {}
    for k, v in sent[0].get("headers", []):
        hdrs.setdefault(k, []).append(v)
    return sent[0]["status"], hdrs


def test_cookies_are_secure_under_tls_only():
    gate = DashboardGate(Inner(), TOKEN)
    status, hdrs = _login(gate, TOKEN, scheme="https")
    assert status == 303
    assert all(b"; Secure" in c for c in hdrs[b"set-cookie"]) and len(hdrs[b"set-cookie"]) == 2
    status, hdrs = _login(gate, TOKEN, scheme="http")
    assert status == 303 and not any(b"Secure" in c for c in hdrs[b"set-cookie"])


def test_failed_logins_are_rate_limited_per_client_within_a_window():
    now = [1000.0]
    gate = DashboardGate(Inner(), TOKEN, LoginLimiter(max_failures=3, window_s=60,
                                                      clock=lambda: now[0]))
    assert [_login(gate, "wrong")[0] for _ in range(3)] == [401, 401, 401]
    status, hdrs = _login(gate, TOKEN)  # even the right token waits out the window
    assert status == 429 and hdrs[b"retry-after"] == [b"60"]
    assert _login(gate, TOKEN, client="10.0.0.2")[0] == 303  # another client is not held
    now[0] += 30
    assert _login(gate, "wrong")[0] == 429
    now[0] += 31
    assert _login(gate, TOKEN)[0] == 303
