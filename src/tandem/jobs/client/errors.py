"""What the train server's HTTP answers become in the client: one exception class per status
code, raised from the code itself (never recovered from a message's text).

``ServerHTTPError`` is their base; each keeps ``status`` (the HTTP status code), ``detail``
(the server's own words) and ``url`` (the server). Where a code meant one of tandem's errors
before these classes existed, its class is that error too, so existing ``except`` clauses
still catch it: a 404 is a ``JobNotFoundError``, a 413 or 422 a ``ConfigError``.
"""

from __future__ import annotations

from tandem._core.errors import ConfigError, JobNotFoundError, TandemError

__all__ = [
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "PayloadTooLarge",
    "ServerHTTPError",
    "ServerInternalError",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnprocessableEntity",
    "error_for_status",
]


class ServerHTTPError(TandemError):
    """The train server answered with an HTTP error status (4xx or 5xx)."""

    status: int = 0
    """The HTTP status code (set on every instance; the class's own for its subclasses)."""

    def __init__(self, message: str, *, status: int | None = None, detail: str = "",
                 url: str = "") -> None:
        super().__init__(message)
        if status is not None:
            self.status = status
        self.detail = detail
        self.url = url


class BadRequest(ServerHTTPError):
    """400: the request was malformed."""

    status = 400


class Unauthorized(ServerHTTPError):
    """401: no token, or the wrong one."""

    status = 401


class Forbidden(ServerHTTPError):
    """403: the token is known but may not do this."""

    status = 403


class NotFound(ServerHTTPError, JobNotFoundError):
    """404: no such job, model, version or route."""

    status = 404

    def __str__(self) -> str:
        return ServerHTTPError.__str__(self)


class Conflict(ServerHTTPError):
    """409: the request contradicts the server's state (a version that exists already)."""

    status = 409


class PayloadTooLarge(ServerHTTPError, ConfigError):
    """413: the body (an upload) is over the server's limit."""

    status = 413


class UnprocessableEntity(ServerHTTPError, ConfigError):
    """422: the body is well formed but its values are refused."""

    status = 422


class TooManyRequests(ServerHTTPError):
    """429: over a rate limit; retry later."""

    status = 429


class ServerInternalError(ServerHTTPError):
    """500 (and any other 5xx without a class of its own): the server failed."""

    status = 500


class ServiceUnavailable(ServerHTTPError):
    """503: the server cannot serve this now (starting, stopping, overloaded)."""

    status = 503


_BY_STATUS: dict[int, type[ServerHTTPError]] = {
    cls.status: cls
    for cls in (BadRequest, Unauthorized, Forbidden, NotFound, Conflict, PayloadTooLarge,
                UnprocessableEntity, TooManyRequests, ServerInternalError, ServiceUnavailable)
}


def error_for_status(status: int, message: str, detail: str, url: str) -> ServerHTTPError:
    """The exception for an HTTP error ``status``: its own class, else ``ServerInternalError``
    for a 5xx and ``ServerHTTPError`` for any other code."""
    cls = _BY_STATUS.get(status) or (ServerInternalError if status >= 500 else ServerHTTPError)
    return cls(message, status=status, detail=detail, url=url)
