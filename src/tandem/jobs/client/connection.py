"""Talking to the train server: HTTP requests with clear errors, and the server-sent
event stream parser."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tandem._core.errors import TandemError
from tandem._core.extras import import_optional
from tandem.jobs.client.discovery import ADDRESS_ENV, TOKEN_ENV, server_file_path
from tandem.jobs.client.errors import error_for_status


class ServerUnavailableError(TandemError, ConnectionError):
    """The train server could not be reached."""


class ServerConnection:
    """An httpx client that turns transport and HTTP errors into clear ``TandemError``s."""

    def __init__(self, url: str, token: str | None, timeout_s: float = 30.0) -> None:
        httpx = import_optional("httpx", "server", f"Talking to the train server at {url}")
        self.url = url
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._httpx = httpx
        # Plain HTTP needs no certificates: loading the default CA bundle cost 0.1-0.25 s
        # of every client's start (the first request of a Tuner on a server); HTTPS keeps
        # the default verification.
        tls = url.lower().startswith("https:")
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s,
                                 **({} if tls else {"verify": False}))

    def close(self) -> None:
        self.http.close()

    def unreachable(self, e: BaseException) -> ServerUnavailableError:
        reason = "connection refused" if isinstance(e, self._httpx.ConnectError) else (
            f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
        if "refused" in str(e).lower():
            reason = "connection refused"
        return ServerUnavailableError(
            f"cannot reach the tandem server at {self.url} ({reason}). Start it with "
            f"`tandem server start`, or unset {ADDRESS_ENV} to train in this process."
        )

    def request(self, method: str, path: str, **kwargs: object) -> Any:
        """Sends a request; returns the httpx response (2xx only)."""
        try:
            r = self.http.request(method, path, **kwargs)
        except self._httpx.TransportError as e:
            raise self.unreachable(e) from None
        self.check(r)
        return r

    def json(self, method: str, path: str, **kwargs: object) -> Any:
        return self.request(method, path, **kwargs).json()

    def check(self, r: Any) -> None:
        """Raises the ``tandem.jobs.client.errors`` class of an error status (a
        ``ServerHTTPError``: ``NotFound``, ``Conflict``, ...) with the server's detail."""
        status = int(r.status_code)
        if status < 400:
            return
        try:
            r.read()
            detail = r.json().get("detail", r.text)
        except Exception:  # noqa: BLE001 - not JSON
            detail = r.text
        if isinstance(detail, list):  # FastAPI validation errors
            detail = "; ".join(
                f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg')}" for d in detail
            )
        detail = str(detail)
        if status == 401:
            message = (
                f"the tandem server at {self.url} refused the request: {detail}. Pass the "
                f"server's token with tandem.init(token=...) or {TOKEN_ENV} (a local server "
                f"writes it to {server_file_path()})."
            )
        elif status in (404, 413, 422):
            message = detail
        else:
            message = f"the tandem server at {self.url} answered {status}: {detail}"
        raise error_for_status(status, message, detail, self.url)


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` pairs from the lines of a text/event-stream."""
    event, data = "message", list[str]()
    for line in lines:
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
