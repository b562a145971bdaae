"""Who may do what on the train server, and the audit log of what was done.

``AccessControl`` is an ASGI middleware placed right behind the token check (``TokenAuth``
puts the authenticated ``User`` in the scope). For every request it names the action
(``classify``), finds the owner of the object acted on (a job's, a registered model's),
asks the policy (``users.decide``) and either refuses with 403 (the message names the
rule and the owner) or lets the request through; every write, allowed or refused, goes to
the audit log with its outcome (the HTTP status).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool

from tandem.jobs.store.base import JobRecord, encode_json
from tandem.server.auth import USER_KEY
from tandem.server.context import ServerContext
from tandem.server.users import ADMIN, AccountStore, User, decide

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

AUDIT_KEY = "tandem.audit"  # a dict in the scope: a route may set "target" (a new job's id)

__all__ = ["AUDIT_KEY", "AccessControl", "Action", "classify", "current_user", "job_owner",
           "note_target"]


@dataclass(frozen=True)
class Action:
    """What a request does: ``name`` (``jobs.stop``), the object (``kind``, ``key``),
    whether it writes, and whether it goes to the audit log."""

    name: str
    kind: str | None = None
    key: str | None = None
    write: bool = True
    audited: bool = True

    @property
    def target(self) -> str | None:
        return f"{self.kind} {self.key}" if self.kind and self.key else self.kind


_SEG = r"([^/]+)"
_ROUTES: list[tuple[str, re.Pattern[str], str, str | None, bool]] = [
    # method, path, action, kind of the object in the path, audited
    ("POST", re.compile(r"/api/jobs"), "jobs.submit", None, True),
    ("POST", re.compile(rf"/api/jobs/{_SEG}/stop"), "jobs.stop", "job", True),
    ("POST", re.compile(r"/api/calls"), "calls.answer", None, False),
    ("PUT", re.compile(rf"/api/packages/{_SEG}"), "packages.upload", "package", True),
    ("POST", re.compile(rf"/api/models/{_SEG}/versions"), "models.put", "model", True),
    ("PUT", re.compile(rf"/api/models/{_SEG}/aliases/{_SEG}"), "models.alias", "model", True),
    ("DELETE", re.compile(rf"/api/models/{_SEG}/versions/{_SEG}"), "models.delete", "model",
     True),
    ("POST", re.compile(r"/api/users"), "users.add", None, True),
    ("DELETE", re.compile(rf"/api/users/{_SEG}"), "users.revoke", "user", True),
    ("GET", re.compile(r"/api/users"), "users.list", None, False),
    ("GET", re.compile(r"/api/audit"), "audit.list", None, False),
    ("PUT", re.compile(rf"/api/quotas/{_SEG}"), "quotas.set", "user", True),
    ("DELETE", re.compile(rf"/api/quotas/{_SEG}"), "quotas.delete", "user", True),
    ("PUT", re.compile(rf"/api/users/{_SEG}/role"), "users.set_role", "user", True),
    ("PUT", re.compile(rf"/api/users/{_SEG}/group"), "users.set_group", "user", True),
    ("DELETE", re.compile(rf"/api/users/{_SEG}/group"), "users.set_group", "user", True),
    ("PUT", re.compile(rf"/api/groups/{_SEG}/quota"), "quotas.set", "group", True),
    ("DELETE", re.compile(rf"/api/groups/{_SEG}/quota"), "quotas.delete", "group", True),
]


_EVENTS = re.compile(rf"/api/jobs/{_SEG}/events")


def classify(method: str, path: str, query: bytes = b"") -> Action | None:
    """The action of a request (None: a read of no special kind)."""
    if method == "GET" and b"calls=" in query:
        match = _EVENTS.fullmatch(path)
        calls = parse_qs(query.decode("latin-1")).get("calls", ["false"])[-1].lower()
        if match is not None and calls in ("true", "1", "yes", "on"):
            # taking a job's questions (a tuning trial's verdicts) is acting as its submitter
            return Action("jobs.answer_calls", "job", match.group(1), write=True,
                          audited=False)
    for m, pattern, name, kind, audited in _ROUTES:
        if method != m:
            continue
        match = pattern.fullmatch(path)
        if match is not None:
            key = match.group(1) if kind and match.groups() else None
            return Action(name, kind, key, write=method not in ("GET", "HEAD"),
                          audited=audited)
    if method in ("GET", "HEAD", "OPTIONS"):
        return None
    return Action(f"{method} {path}"[:64])


def current_user(request: HTTPConnection) -> User:
    """The user a request runs as (the admin when the app has no access control)."""
    from tandem.server.users import Role

    user = request.scope.get(USER_KEY)
    return user if isinstance(user, User) else User(ADMIN, Role.ADMIN)


def note_target(request: HTTPConnection, target: str) -> None:
    """Called by a route that creates an object: the audit entry names it."""
    audit = request.scope.get(AUDIT_KEY)
    if isinstance(audit, dict):
        audit["target"] = target


def job_owner(rec: JobRecord | None) -> str:
    """A job record's owner (jobs recorded before users existed are the admin's)."""
    owner = (rec.spec_json or {}).get("owner") if rec is not None else None
    return str(owner) if owner else ADMIN


class AccessControl:
    """See the module docstring. ``server``: the ``TrainServer`` (to find owners)."""

    def __init__(self, app: ASGIApp, server: ServerContext, accounts: AccountStore) -> None:
        self.app = app
        self.server = server
        self.accounts = accounts

    def owner(self, action: Action) -> str | None:
        """The owner of the object ``action`` changes; None for a new object (or none)."""
        if action.key is None:
            return None
        if action.kind == "job":
            rec = self.server.store.get_job(action.key)
            return job_owner(rec) if rec is not None else None
        if action.kind == "model":
            owner = self.accounts.owner("model", action.key)
            if owner is not None:
                return owner
            try:
                self.server.models_store().versions(action.key)
            except Exception:  # noqa: BLE001 - no such model (or a bad name: the route says)
                return None
            return ADMIN  # registered before users existed
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get(USER_KEY) if scope["type"] == "http" else None
        if not isinstance(user, User):
            await self.app(scope, receive, send)
            return
        action = classify(scope.get("method") or "GET", scope.get("path") or "/",
                          scope.get("query_string") or b"")
        if action is None:
            await self.app(scope, receive, send)
            return
        if user.is_admin:  # may do anything: no owner to look up (the store may be down)
            await self._run(scope, receive, send, user, action)
            return
        try:
            owner = await run_in_threadpool(self.owner, action)
        except Exception as e:  # noqa: BLE001 - the store is down: nothing is decided
            await _respond(send, 503, f"cannot check who owns {action.target or 'it'}: {e} "
                                      f"The request was not carried out; retry later.")
            return
        decision = decide(user, action.name, owner, action.target, action.write)
        if not decision.allowed:
            if action.audited or action.write:
                await run_in_threadpool(self._audit, user.name, action.name, action.target,
                                        403, decision.reason)
            await _respond(send, 403, decision.reason)
            return
        await self._run(scope, receive, send, user, action)

    async def _run(self, scope: Scope, receive: Receive, send: Send, user: User,
                   action: Action) -> None:
        """Carries out an allowed request; audits it with its outcome."""
        audit: dict[str, str] = {}
        scope = {**scope, AUDIT_KEY: audit}
        status = [500]

        async def watched_send(msg: Message) -> None:
            if msg["type"] == "http.response.start":
                status[0] = int(msg["status"])
            await send(msg)

        try:
            await self.app(scope, receive, watched_send)
        finally:
            if action.audited:
                await run_in_threadpool(self._after, user, action, status[0], audit)

    def _after(self, user: User, action: Action, status: int, audit: dict[str, str]) -> None:
        if action.name == "models.put" and status < 400 and action.key:
            try:
                self.accounts.claim("model", action.key, user.name)
            except Exception:  # noqa: BLE001 - stored; its owner shows as unknown
                logger.exception("could not record the owner of model %s", action.key)
        self._audit(user.name, action.name, audit.get("target") or action.target, status,
                    audit.get("detail"))

    def _audit(self, user: str, action: str, target: str | None, status: int,
               detail: str | None) -> None:
        try:
            self.accounts.audit(user, action, target, status, detail)
        except Exception:  # noqa: BLE001 - the audit log is down: the answer stands
            logger.exception("could not write the audit log (%s %s %s)", user, action, target)


async def _respond(send: Send, status: int, reason: str) -> None:
    body = encode_json({"detail": reason}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
