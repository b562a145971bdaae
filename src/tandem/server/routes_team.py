"""The train server's team routes: roles changed in place, groups and group quotas.

=============================================  =========================================
``PUT    /api/users/{name}/role``              ``{"role"}``: change a user's role in place
                                               (its token stays) (admin)
``PUT    /api/users/{name}/group``             ``{"group"}``: put the user in a group
                                               (one group per user) (admin)
``DELETE /api/users/{name}/group``             take the user out of its group (admin)
``GET    /api/groups``                         groups: members, quota, what they hold now
``PUT    /api/groups/{group}/quota``           set ``{"cpus", "gpus", "memory",
                                               "queued_jobs"}`` for the group's members
                                               together (admin)
``DELETE /api/groups/{group}/quota``           remove it (admin)
=============================================  =========================================

Every write is audited (``users.set_role`` with the old and new role, ``users.set_group``,
``quotas.set`` / ``quotas.delete`` on ``group NAME``). Group quotas and fair share across
groups are decided by the admission policy (``tandem.jobs.admission.fair``); membership is
kept in the store whatever the policy, and applied to a policy with quotas at start.
"""

from __future__ import annotations

import math
from typing import Any

from fastapi import APIRouter, FastAPI, Path, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from tandem.server.access import AUDIT_KEY
from tandem.server.context import ServerContext
from tandem.server.users import AccountStore, Role, UserError
from tandem.server.users_api import (
    NAME_PATTERN,
    QuotaIn,
    _docs,
    _quota_view,
    memberships_in_force,
    quotas_in_force,
)

__all__ = ["apply_stored_groups", "groups_view", "register_team_routes"]


class RoleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Role = Field(..., description="admin, member or viewer")


class GroupIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    group: str = Field(..., pattern=NAME_PATTERN, description="a letter, then letters, "
                       "digits, '_', '.', '-' (at most 64)")


def _policy_has_groups(server: ServerContext) -> bool:
    return getattr(server.service.scheduler, "set_group", None) is not None


def apply_stored_groups(server: ServerContext, accounts: AccountStore) -> None:
    """Applies the stored memberships and group quotas to the server's admission policy
    (one with quotas; a FIFO server keeps them in the store only)."""
    if not _policy_has_groups(server):
        return
    for user, group in accounts.groups().items():
        server.service.set_group(user, group)
    for group, quota in accounts.group_quotas().items():
        server.service.set_group_quota(group, quota)


def groups_view(server: ServerContext, accounts: AccountStore,
                in_use: dict[str, dict[str, float]] | None = None) -> dict[str, object]:
    """``{group: {"members", "quota", "in_use"}}``: every group with a member or a quota,
    however its members were put in it (``--quotas``' ``"group:NAME": {"members"}``, a
    user added with a group, ``users set-group``) — what the admission policy applies."""
    members: dict[str, list[str]] = {}
    for user, group in sorted(memberships_in_force(server, accounts).items()):
        members.setdefault(group, []).append(user)
    quotas = group_quotas_in_force(server, accounts)
    if in_use is None:
        in_use = _in_use(server)
    out: dict[str, Any] = {}
    for group in sorted(set(members) | set(quotas)):
        held: dict[str, float] = {}
        for user in members.get(group, []):
            for k, v in in_use.get(user, {}).items():
                held[k] = held.get(k, 0.0) + v
        out[group] = {"members": members.get(group, []), "quota": quotas.get(group),
                      "in_use": held}
    return out


def group_quotas_in_force(server: ServerContext,
                          accounts: AccountStore) -> dict[str, dict[str, object]]:
    """``{group: quota}`` the admission policy applies (the config's and those set over
    HTTP); a FIFO server's are the stored ones (it has no quotas to apply)."""
    quotas = getattr(server.service.scheduler, "quotas", None)
    if quotas is None:
        return accounts.group_quotas()
    return {g: _quota_view(q) for g, q in sorted(quotas.by_group.items())}


def _in_use(server: ServerContext) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for job in server.service.list():
        placement = getattr(job, "placement", None)
        if placement is None or job.status.is_terminal:
            continue
        held = out.setdefault(getattr(job, "owner", "default"), {})
        for b in placement.bundles:
            for k, v in b.items():
                if v:
                    held[k] = held.get(k, 0.0) + float(v)
    return out


def _detail(request: Request, text: str) -> None:
    audit = request.scope.get(AUDIT_KEY)
    if isinstance(audit, dict):
        audit["detail"] = text


def team_router(server: ServerContext, accounts: AccountStore) -> APIRouter:
    r = APIRouter(tags=["users"])
    user_path = Path(..., pattern=NAME_PATTERN)
    group_path = Path(..., pattern=NAME_PATTERN)

    @r.put("/api/users/{name}/role", responses=_docs(404, 422))
    def set_role(body: RoleIn, request: Request, name: str = user_path) -> Any:
        try:
            out = accounts.set_role(name, body.role)
        except UserError as e:
            return JSONResponse({"detail": str(e)}, status_code=404 if "no active" in str(e)
                                else 422)
        _detail(request, f"{out['was']} -> {out['role']}")
        return out

    @r.put("/api/users/{name}/group", responses=_docs(404, 422))
    def set_group(body: GroupIn, request: Request, name: str = user_path) -> Any:
        try:
            accounts.set_group(name, body.group)
        except UserError as e:
            return JSONResponse({"detail": str(e)}, status_code=404)
        if _policy_has_groups(server):
            server.service.set_group(name, body.group)
        _detail(request, f"group {body.group}")
        return {"name": name, "group": body.group}

    @r.delete("/api/users/{name}/group", responses=_docs(404, 422))
    def leave_group(request: Request, name: str = user_path) -> Any:
        try:
            accounts.set_group(name, None)
        except UserError as e:
            return JSONResponse({"detail": str(e)}, status_code=404)
        if _policy_has_groups(server):
            server.service.set_group(name, None)
        _detail(request, "no group")
        return {"name": name, "group": None}

    @r.get("/api/groups", responses=_docs())
    def groups() -> Any:
        return {"scheduling": getattr(server.service.scheduler, "name", None),
                "groups": groups_view(server, accounts)}

    @r.put("/api/groups/{group}/quota", responses=_docs(422))
    def set_group_quota(body: QuotaIn, group: str = group_path) -> Any:
        quota = body.model_dump(exclude_none=True)
        for k, v in quota.items():
            if isinstance(v, float) and not math.isfinite(v):
                return JSONResponse({"detail": f"{k}={v} is not a finite number"},
                                    status_code=422)
        # the policy checks first (ConfigError -> 422 naming --scheduling), then it is kept
        server.service.set_group_quota(group, quota)
        accounts.set_group_quota(group, quota)
        return {"group": group, "quota": quota, "groups": groups_view(server, accounts),
                "quotas": quotas_in_force(server)}

    @r.delete("/api/groups/{group}/quota", responses=_docs(422))
    def delete_group_quota(group: str = group_path) -> Any:
        server.service.set_group_quota(group, None)
        accounts.set_group_quota(group, None)
        return {"group": group, "groups": groups_view(server, accounts)}

    return r


def register_team_routes(app: FastAPI, server: ServerContext, accounts: AccountStore) -> None:
    """Adds the team routes to the server's app and applies the stored groups."""
    apply_stored_groups(server, accounts)
    app.include_router(team_router(server, accounts))
