"""The dashboard's HTTP routes: the page and the JSON it reads.

=====================================================  =====================================
``GET /``                                              the page (one HTML shell + app.js)
``GET /api/dashboard/summary``                         mode, version, active job counts
``GET /api/dashboard/jobs``                            a page of jobs with progress, resources
``GET /api/dashboard/jobs/{id}/checkpoints``           checkpoints with their metrics
``GET /api/dashboard/events``                          server-sent events: job, progress,
                                                       cluster
``GET /api/dashboard/cluster``                         capacity vs allocation now and over
                                                       time, nodes, holders, the queue
``GET /api/dashboard/experiments[/{id}]``              experiments (trials, curves, decisions)
``GET /api/dashboard/runs[/{id}]``                     run folders on disk
=====================================================  =====================================

The server's job routes (``/api/jobs/...``: detail, results, logs, usage, events, stop) are
used as they are. ``disk_router`` alone serves ``tandem dashboard PATH``.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse

from tandem.jobs.spec import JobStatus
from tandem.jobs.store.base import encode_json
from tandem.server.context import ServerContext
from tandem.server.dashboard.gate import CSP, static_file
from tandem.server.dashboard.live import SPARK_POINTS, DashboardLive, Progress
from tandem.server.dashboard.ondisk import ResultsIndex
from tandem.server.vocabulary import shown_job_state, stored_preemptions

PAGE_SIZE_MAX = 500
ERROR_CHARS = 300
_SPARK_CACHE = 4096


_WHAT = {
    401: "missing or wrong token (or dashboard cookie)",
    404: "no such job, experiment or run",
    422: "invalid input: the field and the reason are named",
    503: "the job store is unreachable; retry later",
}


def _documented(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a dashboard route can give, for the OpenAPI document."""
    return {c: {"description": _WHAT[c]} for c in (401, 503, *codes)}


class _JSON(JSONResponse):
    def render(self, content: object) -> bytes:
        return encode_json(content).encode("utf-8")


def page_response() -> HTMLResponse:
    body = static_file("app.html") or b"<!doctype html><p>dashboard files are missing</p>"
    return HTMLResponse(body, headers={
        "content-security-policy": CSP.decode(), "cache-control": "no-store",
        "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
        "x-frame-options": "DENY"})


def _not_found(what: str, ident: str) -> _JSON:
    shown = ident if len(ident) <= 40 else ident[:40] + "..."
    return _JSON({"detail": f"no {what} with id {shown!r} (an id is the 16 hex digits the "
                            f"list gives); list them with GET /api/dashboard/{what}s"},
                 status_code=404)


_ID = re.compile(r"[0-9a-f]{16}")


def disk_router(index: ResultsIndex, owners: Any = None) -> APIRouter:
    """Routes over experiments and runs on disk (shared by the server and the local app).
    ``owners`` (the server's): ``paths -> {path: owner}``, shown as each one's owner."""
    r = APIRouter()

    def with_owners(items: list[dict[str, Any]]) -> list[dict[str, object]]:
        if owners is None or not items:
            return items
        found = owners([str(i["path"]) for i in items])
        return [{**i, "owner": found.get(str(i["path"]))} for i in items]

    def id_path() -> Any:
        # checked in the route: a malformed id is "no such experiment" (404 with a message),
        # not a validation error
        return Path(..., max_length=4096, description="an id from the listing (16 hex digits)")

    @r.get("/api/dashboard/experiments", responses=_documented())
    def experiments() -> Any:
        return _JSON({"experiments": with_owners(index.list_experiments())})

    @r.get("/api/dashboard/experiments/{exp_id}", responses=_documented(404, 422))
    def experiment(exp_id: str = id_path(),
                   metric: str | None = Query(None, max_length=256)) -> Any:
        out = index.experiment(exp_id, metric) if _ID.fullmatch(exp_id) else None
        return _not_found("experiment", exp_id) if out is None else _JSON(out)

    @r.get("/api/dashboard/runs", responses=_documented())
    def runs() -> Any:
        return _JSON({"runs": with_owners(index.list_runs())})

    @r.get("/api/dashboard/runs/{run_id}", responses=_documented(404, 422))
    def run(run_id: str = id_path()) -> Any:
        out = index.run(run_id) if _ID.fullmatch(run_id) else None
        return _not_found("run", run_id) if out is None else _JSON(out)

    return r


class _Sparks:
    """Progress of jobs that ended, read once from the store (they no longer change)."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self._cache: OrderedDict[str, dict[str, Any]] = OrderedDict()

    def get(self, job_id: str, last_iteration: Any = None) -> dict[str, Any]:
        """``last_iteration`` (the final ``training_iteration``, if known) lets it read only
        the last reports: seq N is the report of iteration N + 1."""
        hit = self._cache.get(job_id)
        if hit is not None:
            self._cache.move_to_end(job_id)
            return hit
        p = Progress()
        after = -1
        if isinstance(last_iteration, (int, float)) and last_iteration > SPARK_POINTS:
            after = int(last_iteration) - SPARK_POINTS - 1
        rows = [r.metrics for r in self.store.get_reports(job_id, after_seq=after,
                                                            limit=SPARK_POINTS * 4)]
        p.add(rows)
        out = p.as_dict()
        self._cache[job_id] = out
        while len(self._cache) > _SPARK_CACHE:
            self._cache.popitem(last=False)
        return out


def _resources(spec_json: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    for b in spec_json.get("bundles") or []:
        for k, v in dict(b).items():
            if isinstance(v, (int, float)):
                out[k] = out.get(k, 0.0) + float(v)
    return out


def _error_summary(error: str | None) -> str | None:
    if not error:
        return None
    lines = [ln for ln in error.strip().splitlines() if ln.strip()]
    first = lines[-1] if lines and lines[0].startswith("Traceback") else (lines[0] if lines
                                                                          else "")
    return first[:ERROR_CHARS]


def server_router(server: ServerContext, live: DashboardLive, index: ResultsIndex) -> APIRouter:
    """The dashboard routes of a train server."""
    from tandem import __version__

    r = APIRouter()
    sparks = _Sparks(server.store)
    from tandem.server.dashboard.models import models_router

    r.include_router(models_router(server, live))

    @r.get("/", response_class=HTMLResponse, include_in_schema=False)
    def page() -> Any:
        return page_response()

    @r.get("/api/dashboard/summary", responses=_documented())
    def summary(request: Request) -> Any:
        from tandem.server.access import current_user

        user = current_user(request)
        counts: dict[str, int] = {}
        for j in server.service.list():
            if live._tracked(j.job_id):
                counts[j.status.value] = counts.get(j.status.value, 0) + 1
        return _JSON({"mode": "server", "version": __version__, "active": counts,
                      "cluster": type(server.cluster).__name__,
                      "resources": server.cluster.resources(),
                      "models": True,
                      "user": {"name": user.name, "role": user.role.value}})

    @r.get("/api/dashboard/jobs", responses=_documented(422))
    def jobs(
        state: list[JobStatus] | None = Query(None, description="keep jobs in these states"),  # noqa: B008
        name: str | None = Query(None, max_length=512),
        tag: str | None = Query(None, max_length=256),
        limit: int = Query(50, ge=1, le=PAGE_SIZE_MAX),
        offset: int = Query(0, ge=0, le=2**62),
    ) -> Any:
        t0 = time.perf_counter()
        states = [s.value for s in state] if state else None
        recs = server.store.list_jobs(states=states, name=name or None, tag=tag or None,
                                      limit=limit + 1, offset=offset)
        more = len(recs) > limit
        out = []
        now = time.time()
        for rec in recs[:limit]:
            live_state = server.live_state(rec.job_id)
            st = live_state or rec.state
            prog = live.progress(rec.job_id)
            if prog is None and (rec.is_terminal or rec.state == "RUNNING"):
                last_it = ((rec.result or {}).get("metrics") or {}).get("training_iteration")
                prog = sparks.get(rec.job_id, last_it) if JobStatus(st).is_terminal else None
            if prog is None:
                prog = {"iteration": 0, "metric": None, "value": None, "spark": []}
            final = (rec.result or {}).get("metrics") or {}
            if prog["value"] is None and prog["metric"] is None and final:
                from tandem.server.dashboard.live import main_metric

                m = main_metric(final)
                prog = {**prog, "metric": m, "value": final.get(m) if m else None}
            start, end = rec.started_at, rec.ended_at
            out.append({
                "job_id": rec.job_id, "name": rec.name,
                "state": shown_job_state(st, (rec.spec_json or {}).get("metadata")),
                "priority": rec.priority,
                "owner": (rec.spec_json or {}).get("owner") or "admin",
                "tags": list(rec.tags), "submitted_at": rec.submitted_at,
                "started_at": start, "ended_at": end,
                "age_s": now - rec.submitted_at,
                "duration_s": ((end or now) - start) if start else None,
                "resources": _resources(rec.spec_json or {}),
                "num_workers": (rec.spec_json or {}).get("num_workers"),
                "error": _error_summary(rec.error), "progress": prog,
                **_why(server, rec.job_id, st, stored_preemptions(rec)),
            })
        return _JSON({"jobs": out, "limit": limit, "offset": offset, "has_more": more,
                      "server_ms": round((time.perf_counter() - t0) * 1000, 2)})

    @r.get("/api/dashboard/jobs/{job_id}/checkpoints", responses=_documented(404, 422))
    def job_checkpoints(job_id: str = Path(..., min_length=1, max_length=128)) -> Any:
        rec = server.get(job_id)
        summary = rec.result or {}
        paths = list(dict.fromkeys(summary.get("checkpoints") or []))
        run_path = summary.get("path") or (rec.spec_json or {}).get("metadata", {}).get(
            "run_path")
        from tandem.server.dashboard.ondisk import checkpoints as on_disk

        rows: list[dict[str, Any]] = []
        after = -1
        while len(rows) < 200_000:
            page = server.store.get_reports(job_id, after_seq=after, limit=10_000)
            if not page:
                break
            rows.extend(p.metrics for p in page)
            after = page[-1].seq
        by_iter = {int(m["training_iteration"]): m for m in rows
                   if isinstance(m.get("training_iteration"), (int, float))}
        found = {c["path"]: c for c in (on_disk(run_path, rows) if run_path and "://" not in
                                        str(run_path) else [])}
        for p in paths:
            if p not in found:
                name = os.path.basename(str(p).rstrip("/"))
                try:
                    it: int | None = int(name.split("_", 1)[1])
                except (IndexError, ValueError):
                    it = None
                found[p] = {"path": p, "iteration": it,
                            "metrics": by_iter.get(it, {}) if it is not None else {},
                            "time": None, "deleted": "://" not in p and not os.path.exists(p)}
        items = sorted(found.values(), key=lambda c: (c.get("iteration") or 0, c["path"]))
        config = None
        if run_path and "://" not in str(run_path):
            from tandem.server.dashboard.ondisk import PARAMS_FILE, _read_json

            config = _read_json(os.path.join(str(run_path), PARAMS_FILE))
        return _JSON({"job_id": job_id, "checkpoints": items, "config": config,
                      "latest": summary.get("checkpoint_path")})

    @r.get("/api/dashboard/cluster", responses=_documented(422))
    def cluster(since: float | None = Query(None, ge=0, le=1e12)) -> Any:
        now = live.sample() if not live.fine else live.fine[-1]
        return _JSON({"now": now, "history": live.history(since), "nodes": live.nodes(),
                      "holders": live.holders(), "queue": live.queue(),
                      "scheduling": live.scheduling(),
                      "cluster": type(server.cluster).__name__})

    @r.get("/api/dashboard/events", include_in_schema=False)
    async def events() -> Any:
        stream = live.open_stream(asyncio.get_running_loop())
        return StreamingResponse(_stream(live, stream), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache",
                                          "X-Accel-Buffering": "no"})

    r.include_router(disk_router(index, owners=_folder_owners(server)))
    return r


def _folder_owners(server: ServerContext) -> object:
    """``paths -> {path: owner}`` of experiment/run folders (the user whose job first
    wrote there; see ``users.claim_run_folder``)."""
    def owners(paths: list[str]) -> dict[str, str]:
        from tandem.server.users import experiment_key

        keys = {experiment_key(p): p for p in paths}
        found = server.accounts().owners("folder", list(keys))
        return {keys[k]: o for k, o in found.items()}

    return owners


async def _stream(live: DashboardLive, stream: Any) -> AsyncIterator[str]:
    try:
        yield f"event: hello\ndata: {json.dumps({'time': time.time()})}\n\n"
        while not stream.closed:
            try:
                kind, data = await asyncio.wait_for(stream.queue.get(), 15.0)
            except asyncio.TimeoutError:
                yield ": keep-alive\n\n"
                continue
            yield f"event: {kind}\ndata: {encode_json(data)}\n\n"
    finally:
        live.close_stream(stream)


def mount(app: Any, server: ServerContext) -> DashboardLive:
    """Adds the dashboard's routes to the server's FastAPI app; returns its live state
    (closed when the app shuts down)."""
    live = DashboardLive(server)

    def job_roots() -> list[str]:
        roots = []
        for rec in server.store.list_jobs(limit=500):
            p = (rec.spec_json or {}).get("metadata", {}).get("run_path")
            if p and "://" not in str(p):
                roots.append(os.path.dirname(str(p).rstrip("/")))
        return roots

    storage = server.config.storage_path
    index = ResultsIndex([storage] if storage else [], extra_roots=job_roots)
    router = server_router(server, live, index)
    app.include_router(router)
    app.router.on_shutdown.append(live.close)
    return live


def _why(server: Any, job_id: str, state: str, preemptions: int = 0) -> dict[str, object]:
    """Why an active job waits, or what happened to it last (preempted, resized), from the
    scheduler's live view; for an ended job (or one no longer in memory), how often it was
    preempted, as its record says."""
    stored: dict[str, object] = {"preemptions": preemptions} if preemptions else {}
    if state not in ("PENDING", "RUNNING", "RESTARTING"):
        return stored
    try:
        job = server.service.get(job_id)
    except Exception:  # noqa: BLE001 - not in memory (ended, or another server's)
        return stored
    reason = getattr(job, "wait_reason", None) if state == "PENDING" else None
    reason = reason or getattr(job, "status_reason", None)
    out: dict[str, Any] = {"reason": reason}
    if getattr(job, "num_preemptions", 0):
        out["preemptions"] = job.num_preemptions
        out["preempted"] = getattr(job, "preempt_reason", None)
    return out
