"""The dashboard's models view: the server's registry (names, versions, aliases, lineage)
and what is being served where."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from tandem.server.context import ServerContext
from tandem.server.dashboard.live import DashboardLive

VERSIONS_SHOWN = 20
ACTIVE = ["PENDING", "RUNNING", "RESTARTING"]


def models_router(server: ServerContext, live: DashboardLive) -> APIRouter:
    r = APIRouter()

    @r.get("/api/dashboard/models", responses={
        401: {"description": "missing or wrong token"},
        503: {"description": "the registry's database is unreachable; retry later"}})
    def models() -> Any:
        from tandem.server.users import ADMIN

        store = server.models_store()
        entries = store.names()
        owners = server.accounts().owners("model", [e["name"] for e in entries])
        out = []
        for entry in entries:
            entry = {**entry, "owner": owners.get(entry["name"], ADMIN)}
            versions = store.versions(entry["name"])[-VERSIONS_SHOWN:]
            out.append({**entry, "detail": [
                {"version": v.version, "created": v.created, "aliases": v.aliases,
                 "metrics": v.metrics, "config": v.config, "lineage": v.lineage,
                 "tags": v.tags, "model_class": v.model_class}
                for v in reversed(versions)]})
        served = []
        for rec in server.store.list_jobs(states=ACTIVE, tag="serve", limit=200):
            meta = (rec.spec_json or {}).get("metadata") or {}
            last = live.last_report(rec.job_id)
            served.append({
                "job_id": rec.job_id, "name": rec.name,
                "owner": (rec.spec_json or {}).get("owner") or ADMIN,
                "state": server.live_state(rec.job_id) or rec.state,
                "model": meta.get("model"), "route_prefix": meta.get("route_prefix"),
                "url": last.get("url"), "replicas": last.get("replicas"),
                "replicas_ready": last.get("replicas_ready"), "started_at": rec.started_at,
                "resources": (rec.spec_json or {}).get("bundles")})
        return {"models": out, "served": served}

    return r
