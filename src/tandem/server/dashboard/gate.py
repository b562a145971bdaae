"""The dashboard's door: a login form, an HttpOnly session cookie, CSRF checks on writes.

``DashboardGate`` is an ASGI middleware placed *outside* the token check (``TokenAuth``):

* ``GET /login`` shows a form; ``POST /login`` (form field ``token``) checks the token and
  answers ``303 → /`` with two cookies: ``tandem_token`` (the token; ``HttpOnly``,
  ``SameSite=Strict``, so page scripts never read it) and ``tandem_csrf`` (a value derived
  from the token; readable by the page's own script, which echoes it in the
  ``X-Tandem-CSRF`` header of every write). The token never appears in a URL: a login link
  printed by ``tandem dashboard`` carries it in the fragment (``/login#token=...``), which
  browsers never send to a server, and the page's script posts it and drops the fragment.
* Under TLS (``https``) both cookies are ``Secure``: a browser never sends them to a
  plain-HTTP service on the same host (a served model, say).
* Failed log-ins are rate-limited per client address: after ``max_failures`` within
  ``window_s`` seconds, ``POST /login`` answers 429 (with ``Retry-After``) until the
  window has passed, right token or not.
* ``POST /logout`` clears both cookies.
* ``/dashboard/static/...`` (the page's own scripts, styles and the charting library) is
  served without a token: it holds no data.
* ``GET /`` without a valid cookie redirects to ``/login``.
* A write (anything but GET/HEAD) that carries the cookie instead of an
  ``Authorization`` header must carry the CSRF header, and its ``Origin`` (when the
  browser sends one) must be this server; then the gate adds the ``Authorization``
  header, and the token check behind it lets it through. A cross-site page cannot read the
  CSRF cookie nor send a custom header without a CORS preflight (which this server never
  allows), so it cannot stop a job.
"""

from __future__ import annotations

import collections
import hashlib
import hmac
import html
import math
import secrets
import threading
import time
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

if TYPE_CHECKING:
    from tandem.server.users import AccountStore

TOKEN_COOKIE = "tandem_token"  # the name TokenAuth reads on GET requests
CSRF_COOKIE = "tandem_csrf"
CSRF_HEADER = b"x-tandem-csrf"
STATIC_PREFIX = "/dashboard/static/"
MAX_LOGIN_BODY = 16 * 1024

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]

_CONTENT_TYPES = {
    ".js": b"text/javascript; charset=utf-8",
    ".css": b"text/css; charset=utf-8",
    ".html": b"text/html; charset=utf-8",
    ".svg": b"image/svg+xml",
    ".txt": b"text/plain; charset=utf-8",
}

_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
]
#: Only the page's own files: no inline script, nothing from another origin.
CSP = (b"default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
       b"img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; "
       b"form-action 'self'; base-uri 'none'")


def csrf_value(token: str) -> str:
    """The CSRF value that goes with a token (an HMAC of it: no state to keep)."""
    return hmac.new(token.encode(), b"tandem-dashboard-csrf", hashlib.sha256).hexdigest()


def static_file(name: str) -> bytes | None:
    """A file shipped in the package's ``static`` folder, or None."""
    if not name or "/" in name or name.startswith("."):
        return None
    try:
        return (resources.files("tandem.server.dashboard") / "static" / name).read_bytes()
    except (FileNotFoundError, IsADirectoryError, OSError):
        return None


def _cookies(scope: Scope) -> dict[str, str]:
    for k, v in scope.get("headers") or []:
        if k == b"cookie":
            try:
                c = SimpleCookie(v.decode("latin-1"))
            except Exception:  # noqa: BLE001 - a malformed cookie header is no cookie
                return {}
            return {name: m.value for name, m in c.items()}
    return {}


def _header(scope: Scope, name: bytes) -> bytes | None:
    for k, v in scope.get("headers") or []:
        if k == name:
            return bytes(v)
    return None


def _same_origin(scope: Scope) -> bool:
    """False when the browser says the request comes from another site (its ``Origin``)."""
    origin = _header(scope, b"origin")
    if origin is None:
        return True  # not a browser, or a same-origin GET
    host = _header(scope, b"host")
    try:
        return host is not None and urlsplit(origin.decode("latin-1")).netloc == host.decode(
            "latin-1")
    except ValueError:
        return False


async def _respond(send: Send, status: int, body: bytes, ctype: bytes = b"text/html; charset=utf-8",
                   headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """Sends one whole answer; a header in ``headers`` replaces the default of that name
    (a static file's ``cache-control``), so no name is sent twice (a browser given two
    ``cache-control`` values may honour the stricter and cache nothing)."""
    given = headers or []
    names = {name for name, _ in given}
    defaults = [(b"content-type", ctype), (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"), (b"content-security-policy", CSP),
                *_SECURITY_HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": [
        *((name, value) for name, value in defaults if name not in names), *given,
    ]})
    await send({"type": "http.response.body", "body": body})


def login_page(error: str = "") -> bytes:
    page = (static_file("login.html") or b"").decode("utf-8")
    msg = f'<p class="error" role="alert">{html.escape(error)}</p>' if error else ""
    return page.replace("<!--ERROR-->", msg).encode("utf-8")


class LoginLimiter:
    """At most ``max_failures`` failed log-ins per client within ``window_s`` seconds.

    Args:
        max_failures: failures allowed in a window.
        window_s: the window's length.
        clock: seconds, monotonic (a simulated one in tests).
        max_clients: clients remembered at once (the oldest are dropped first).
    """

    def __init__(self, max_failures: int = 10, window_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic, max_clients: int = 10_000) -> None:
        self.max_failures = max_failures
        self.window_s = window_s
        self.clock = clock
        self.max_clients = max_clients
        self._fails: collections.OrderedDict[str, collections.deque[float]] = (
            collections.OrderedDict())
        self._lock = threading.Lock()

    def _recent(self, client: str, now: float) -> collections.deque[float]:
        q = self._fails.get(client)
        if q is None:
            return collections.deque()
        while q and q[0] <= now - self.window_s:
            q.popleft()
        if not q:
            del self._fails[client]
        return q

    def retry_after(self, client: str) -> int | None:
        """Seconds until ``client`` may try again (None: it may now)."""
        with self._lock:
            now = self.clock()
            q = self._recent(client, now)
            if len(q) < self.max_failures:
                return None
            return max(1, math.ceil(q[0] + self.window_s - now))

    def failed(self, client: str) -> None:
        with self._lock:
            now = self.clock()
            q = self._recent(client, now)
            q.append(now)
            self._fails[client] = q
            self._fails.move_to_end(client)
            while len(self._fails) > self.max_clients:
                self._fails.popitem(last=False)


def _client(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "?"


def _secure(scope: Scope) -> str:
    return "; Secure" if scope.get("scheme") in ("https", "wss") else ""


class DashboardGate:
    """See the module docstring. ``token`` is the server's token; ``limiter`` counts failed
    log-ins (default: 10 per client per minute); ``accounts`` (a train server's
    ``AccountStore``): any user's token logs in, as that user (the session cookie holds
    that token, and the CSRF value is derived from it)."""

    def __init__(self, app: Any, token: str, limiter: LoginLimiter | None = None,
                 accounts: AccountStore | None = None) -> None:
        self.app = app
        self._token = token
        self._csrf = csrf_value(token)
        self.limiter = limiter or LoginLimiter()
        self._accounts = accounts

    def _ok(self, given: str | None) -> bool:
        return bool(given) and secrets.compare_digest(
            (given or "").encode("utf-8", "replace"), self._token.encode())

    async def _valid(self, given: str | None) -> bool:
        """True for the server's token, or (with ``accounts``) any user's."""
        if not given:
            return False
        if self._ok(given):
            return True
        if self._accounts is None or len(given) > 512:
            return False
        from starlette.concurrency import run_in_threadpool

        try:
            return await run_in_threadpool(self._accounts.authenticate, given) is not None
        except Exception:  # noqa: BLE001 - the users' table is unreachable: not logged in
            return False

    async def _cookie_ok(self, scope: Scope) -> bool:
        return await self._valid(_cookies(scope).get(TOKEN_COOKIE))

    def _session_cookies(self, scope: Scope, token: str) -> list[tuple[bytes, bytes]]:
        common = f"Path=/; SameSite=Strict{_secure(scope)}"
        return [
            (b"set-cookie", f"{TOKEN_COOKIE}={token}; {common}; HttpOnly".encode()),
            (b"set-cookie", f"{CSRF_COOKIE}={csrf_value(token)}; {common}".encode()),
        ]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope.get("path") or "/"
        method: str = scope.get("method") or "GET"
        if path.startswith(STATIC_PREFIX) and method in ("GET", "HEAD"):
            await self._static(path[len(STATIC_PREFIX):], send)
            return
        if path == "/login":
            await self._login(scope, receive, send, method)
            return
        if path == "/logout" and method == "POST":
            if not _same_origin(scope):
                await _respond(send, 403, b"cross-site logout refused", b"text/plain")
                return
            gone = f"Path=/; SameSite=Strict; Max-Age=0{_secure(scope)}"
            await _respond(send, 303, b"", headers=[
                (b"location", b"/login"),
                (b"set-cookie", f"{TOKEN_COOKIE}=; {gone}; HttpOnly".encode()),
                (b"set-cookie", f"{CSRF_COOKIE}=; {gone}".encode())])
            return
        if path == "/" and method in ("GET", "HEAD") and (
                _header(scope, b"authorization") is None) and not await self._cookie_ok(scope):
            await _respond(send, 303, b"", headers=[(b"location", b"/login")])
            return
        if method not in ("GET", "HEAD", "OPTIONS") and _header(scope, b"authorization") is None \
                and await self._cookie_ok(scope):
            session = _cookies(scope)[TOKEN_COOKIE]
            given = _header(scope, CSRF_HEADER) or b""
            if not (secrets.compare_digest(given, csrf_value(session).encode())
                    and _same_origin(scope)):
                await _respond(send, 403, (
                    b'{"detail": "cross-site request refused: a write from the dashboard '
                    b'needs its X-Tandem-CSRF header and a same-origin Origin; reload the '
                    b'page (or log in again) and retry"}'), b"application/json")
                return
            headers = list(scope.get("headers") or [])
            headers.append((b"authorization", b"Bearer " + session.encode()))
            scope = {**scope, "headers": headers}
        await self.app(scope, receive, send)

    async def _static(self, name: str, send: Send) -> None:
        data = static_file(name)
        if data is None:
            await _respond(send, 404, b"not found", b"text/plain")
            return
        ext = name[name.rfind("."):] if "." in name else ""
        await _respond(send, 200, data, _CONTENT_TYPES.get(ext, b"application/octet-stream"),
                       headers=[(b"cache-control", b"max-age=300")])

    async def _login(self, scope: Scope, receive: Receive, send: Send, method: str) -> None:
        if method in ("GET", "HEAD"):
            await _respond(send, 200, login_page())
            return
        if method != "POST":
            await _respond(send, 405, b"use GET or POST", b"text/plain",
                           headers=[(b"allow", b"GET, POST")])
            return
        if not _same_origin(scope):
            await _respond(send, 403, login_page("Cross-site login refused."))
            return
        client = _client(scope)
        wait_s = self.limiter.retry_after(client)
        if wait_s is not None:
            await _respond(send, 429, login_page(
                f"Too many failed log-ins from this address; try again in {wait_s} s."),
                headers=[(b"retry-after", str(wait_s).encode())])
            return
        body = b""
        while True:
            msg = await receive()
            body += msg.get("body", b"")
            if len(body) > MAX_LOGIN_BODY:
                await _respond(send, 413, login_page("The form is too large."))
                return
            if not msg.get("more_body"):
                break
        try:
            form = parse_qs(body.decode("utf-8"), max_num_fields=10)
        except (UnicodeDecodeError, ValueError):
            form = {}
        token = (form.get("token") or [""])[0].strip()
        if not await self._valid(token):
            self.limiter.failed(client)
            await _respond(send, 401, login_page(
                "That token is not this server's (nor a user's). A local server keeps its "
                "own in ~/.tandem/server.json; `tandem dashboard --open` logs you in; an "
                "admin gives a user a token with `tandem users add NAME`."))
            return
        await _respond(send, 303, b"", headers=[(b"location", b"/"),
                                                *self._session_cookies(scope, token)])
