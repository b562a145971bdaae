"""The train server's user, audit and quota routes.

=========================================  =============================================
``GET    /api/me``                         who the token is (name, role)
``GET    /api/users``                      users and roles (admin)
``POST   /api/users``                      add ``{"name", "role", "group"}``; answers the token,
                                           shown only this once (admin)
``DELETE /api/users/{name}``               revoke a user's token (admin)
``GET    /api/audit``                      the audit log, newest first; filters ``user``,
                                           ``action``, ``since``; ``limit`` (admin)
``GET    /api/quotas``                     per-user quotas in force
``PUT    /api/quotas/{name}``              set ``{"cpus", "gpus", "memory",
                                           "queued_jobs"}`` (``*``: everyone else) (admin)
``DELETE /api/quotas/{name}``              remove it (admin)
=========================================  =============================================

Who may call what is decided in ``access.py``; these routes only carry it out. Role
changes, groups and group quotas are in ``routes_team.py``.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from tandem.server.access import current_user, note_target
from tandem.server.context import ServerContext
from tandem.server.users import AccountStore, Role, UserError

NAME_PATTERN = r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$"
_WHAT = {
    401: "missing or wrong token",
    403: "the token's user may not do this (the rule is named)",
    404: "no such user",
    409: "the user exists already",
    422: "invalid input: the field and the reason are named",
}


def _docs(*codes: int) -> dict[int | str, dict[str, Any]]:
    return {c: {"description": _WHAT[c]} for c in (401, 403, *codes)}


class UserIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(..., pattern=NAME_PATTERN, description="a letter, then letters, digits, "
                      "'_', '.', '-' (at most 64)")
    role: Role = Field(Role.MEMBER, description="admin, member or viewer")
    group: str | None = Field(None, pattern=NAME_PATTERN, description="the user's group "
                              "(group quotas, fair share across groups); none by default")


class QuotaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cpus: float | None = Field(None, ge=0, le=1e9)
    gpus: float | None = Field(None, ge=0, le=1e9)
    memory: float | None = Field(None, ge=0, le=1e18, description="bytes")
    queued_jobs: int | None = Field(None, ge=0, le=10**9)


def _quota_view(q: object) -> dict[str, object]:
    return {k: getattr(q, k) for k in ("cpus", "gpus", "memory", "queued_jobs")
            if getattr(q, k) is not None}


def quotas_in_force(server: ServerContext) -> dict[str, dict[str, object]]:
    """``{owner: quota}`` of the server's admission policy (``"*"``: the default)."""
    quotas = getattr(server.service.scheduler, "quotas", None)
    if quotas is None:
        return {}
    out = {owner: _quota_view(q) for owner, q in sorted(quotas.by_owner.items())}
    if quotas.default is not None:
        out["*"] = _quota_view(quotas.default)
    return out


def memberships_in_force(server: ServerContext, accounts: AccountStore) -> dict[str, str]:
    """``{user: group}`` as the admission policy applies it: the members named in the
    server's ``--quotas`` (``"group:ml": {"members": [...]}``, with a token or without),
    then the stored ones (``users add --group``, ``users set-group``; they win). A FIFO
    server has no groups to apply: its memberships are the stored ones."""
    quotas = getattr(server.service.scheduler, "quotas", None)
    if quotas is None:
        return accounts.groups()
    return dict(quotas.group_of)


def apply_stored_quotas(server: ServerContext, accounts: AccountStore) -> None:
    """Applies the quotas set over HTTP before a restart (they outlive the server)."""
    stored = accounts.quotas()
    if not stored or getattr(server.service.scheduler, "set_quota", None) is None:
        return
    for owner, q in stored.items():
        server.service.set_quota(None if owner == "*" else owner, q)


def users_router(server: ServerContext, accounts: AccountStore) -> APIRouter:
    r = APIRouter(tags=["users"])

    @r.get("/api/me", responses=_docs())
    def me(request: Request) -> Any:
        user = current_user(request)
        return {"name": user.name, "role": user.role.value}

    @r.get("/api/users", responses=_docs())
    def list_users() -> Any:
        groups = memberships_in_force(server, accounts)
        return {"users": [{**u, "group": groups.get(u["name"])} for u in accounts.users()]}

    @r.post("/api/users", status_code=201, responses=_docs(409, 422))
    def add_user(body: UserIn, request: Request) -> Any:
        try:
            token = accounts.add_user(body.name, body.role, created_by=current_user(request).name)
        except UserError as e:
            return JSONResponse({"detail": str(e)}, status_code=409)
        note_target(request, f"user {body.name}")
        if body.group is not None:
            accounts.set_group(body.name, body.group)
            if getattr(server.service.scheduler, "set_group", None) is not None:
                server.service.set_group(body.name, body.group)
        return {"name": body.name, "role": body.role.value, "group": body.group,
                "token": token}

    @r.delete("/api/users/{name}", responses=_docs(404, 422))
    def revoke_user(name: str = Path(..., min_length=1, max_length=64)) -> Any:
        try:
            return accounts.revoke(name)
        except UserError as e:
            return JSONResponse({"detail": str(e)}, status_code=404)

    @r.get("/api/audit", responses=_docs(422))
    def audit(
        user: str | None = Query(None, max_length=64),
        action: str | None = Query(None, max_length=64),
        since: float | None = Query(None, ge=0, le=1e12),
        limit: int = Query(100, ge=1, le=10_000),
    ) -> Any:
        return {"entries": [e.to_dict() for e in accounts.audit_log(
            user=user, action=action, since=since, limit=limit)]}

    @r.get("/api/quotas", responses=_docs())
    def quotas() -> Any:
        return {"scheduling": getattr(server.service.scheduler, "name", None),
                "quotas": quotas_in_force(server)}

    @r.put("/api/quotas/{name}", responses=_docs(422))
    def set_quota(body: QuotaIn, name: str = Path(..., pattern=r"^(\*|[A-Za-z][A-Za-z0-9_.\-]{0,63})$")) -> Any:
        quota = body.model_dump(exclude_none=True)
        for k, v in quota.items():
            if isinstance(v, float) and not math.isfinite(v):
                return JSONResponse({"detail": f"{k}={v} is not a finite number"},
                                    status_code=422)
        # the policy checks first (ConfigError -> 422 naming --scheduling), then it is kept
        server.service.set_quota(None if name == "*" else name, quota)
        accounts.set_quota(name, quota)
        return {"name": name, "quota": quota, "quotas": quotas_in_force(server)}

    @r.delete("/api/quotas/{name}", responses=_docs(422))
    def delete_quota(name: str = Path(..., pattern=r"^(\*|[A-Za-z][A-Za-z0-9_.\-]{0,63})$")) -> Any:
        server.service.set_quota(None if name == "*" else name, None)
        accounts.set_quota(name, None)
        return {"name": name, "quotas": quotas_in_force(server)}

    return r
