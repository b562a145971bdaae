"""The HTTP API of the train server (FastAPI). ``create_app(server, token)`` builds it from
one router per area (``routes/``, ``users_api.py``, ``dashboard/``).

=========================================  =============================================
``routes/service.py``
``GET  /api/health``                       version, pid, limits
``GET  /api/cluster``                      resources, what is free, running jobs' usage
``PUT  /api/packages/{id}``                upload a working_dir (zip)
``routes/jobs.py``
``POST /api/jobs``                         submit (base64 cloudpickled JobSpec)
``GET  /api/jobs``                         list; filters ``state`` (repeatable), ``name``,
                                           ``tag``; paging ``limit``/``offset``
``GET  /api/jobs/{id}``                    one job with its transitions and result summary
``POST /api/jobs/{id}/stop[?by=cli]``      stop (a pending job leaves the queue)
``GET  /api/jobs/{id}/results``            reports, paged by ``after_seq``/``limit``
``GET  /api/jobs/{id}/logs``               a rank's output, paged by byte ``offset``;
                                           ``follow=true`` streams it until the job ends
``GET  /api/jobs/{id}/events``             server-sent events: status, reports, event, end;
                                           ``calls=true``: also the job's questions (call)
``POST /api/calls``                        answer jobs' questions, in a batch
``GET  /api/jobs/{id}/outcome``            the pickled JobOutcome of a finished job
``GET  /api/jobs/{id}/usage``              resource-use samples per worker
``routes/models.py``
``/api/models...``                         the model registry
``users_api.py``
``/api/me``, ``/api/users``, ``/api/audit``, ``/api/quotas``: users, the audit log and
quotas; who may do what: ``access.py``
``dashboard/``
``GET  /``                                 the dashboard (login at ``/login``)
=========================================  =============================================

The error answers are in ``routes/errors.py``; the request and answer models in
``routes/common.py``. The dashboard, models and users routes see the server as a
``ServerContext`` (``context.py``).

Every request needs ``Authorization: Bearer <token>`` (see ``auth.py``): the server's own
token (the admin's) or a user's (``tandem users add``).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from tandem.jobs.store.base import encode_json
from tandem.server.access import AccessControl
from tandem.server.auth import TokenAuth
from tandem.server.core import TrainServer
from tandem.server.routes.common import TandemJSONResponse
from tandem.server.routes.errors import install_error_handlers
from tandem.server.routes.jobs import jobs_router
from tandem.server.routes.models import models_router
from tandem.server.routes.service import service_router
from tandem.server.routes_team import register_team_routes
from tandem.server.users_api import apply_stored_quotas, users_router


def create_app(server: TrainServer, token: str) -> Any:
    """The ASGI app: FastAPI routes behind the token check."""
    from tandem import __version__

    app = FastAPI(
        title="tandem train server",
        version=__version__,
        description="Submit, follow and stop training jobs. Every request needs "
                    "`Authorization: Bearer <token>`.",
        default_response_class=TandemJSONResponse,
    )
    limit_bytes = server.config.max_upload_bytes
    accounts = server.accounts(token)
    apply_stored_quotas(server, accounts)

    install_error_handlers(app)
    # One router per area; a new area is one more include line here.
    app.include_router(service_router(server))  # /api/health, /api/cluster, /api/packages
    app.include_router(jobs_router(server, accounts))  # /api/jobs..., /api/calls

    from tandem.server.dashboard import DashboardGate, mount

    app.include_router(models_router(server))  # /api/models... (the model registry)
    app.include_router(users_router(server, accounts))  # /api/me, users, audit, quotas
    register_team_routes(app, server, accounts)  # roles in place, groups, group quotas
    app.router.on_shutdown.append(accounts.close)  # its connections (it reopens if used)
    mount(app, server)
    # The token is checked first (a stranger learns nothing, not even the size limit),
    # then who may do what (and the audit log), then the body size: declared, and counted
    # while it streams in. The dashboard's login gate sits outside them all (its login
    # form is the one page without a token).
    inner = AccessControl(_BodyLimit(app, int(limit_bytes * 4 / 3) + 65536), server, accounts)
    return DashboardGate(TokenAuth(inner, token, accounts), token, accounts=accounts)


class _BodyLimit:
    """Refuses (413) a request whose body is over the limit: at once when its declared
    Content-Length is, else as soon as the bytes streamed in (chunked) pass it — the rest
    is never read and the app's answer is replaced by the 413."""

    def __init__(self, app: Any, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def _refuse(self, send: Any, size: int | None) -> None:
        said = (f"{size / 2**20:.1f} MiB" if size is not None
                else f"over {self.limit / 2**20:.1f} MiB")
        body = encode_json({"detail": (
            f"the request body is {said}, over this server's limit; leave data out of "
            f"runtime_env['working_dir'] (.gitignore) or start the server with a larger "
            f"--max-upload-mb")}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for k, v in scope.get("headers") or []:
            if k == b"content-length" and v.isdigit() and int(v) > self.limit:
                await self._refuse(send, int(v))
                return
        seen = 0
        over = False
        started = False

        async def counted_receive() -> object:
            nonlocal seen, over
            if over:
                return {"type": "http.disconnect"}
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body") or b"")
                if seen > self.limit:
                    over = True
                    return {"type": "http.disconnect"}
            return msg

        async def guarded_send(msg: Any) -> None:
            nonlocal started
            if over:
                return  # the app's answer to a cut-off body is replaced by the 413
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counted_receive, guarded_send)
        except Exception:
            if not over:
                raise
        if over and not started:
            await self._refuse(send, None)
