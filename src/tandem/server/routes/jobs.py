"""``/api/jobs...`` (submit, list, read, stop, results, outcome, usage, logs, events)
and ``POST /api/calls`` (answers to jobs' questions)."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any, Literal

import cloudpickle
from fastapi import APIRouter, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response, StreamingResponse

from tandem.jobs.spec import JobStatus
from tandem.jobs.store import JobRecord, JobStoreError
from tandem.server.access import current_user, job_owner, note_target
from tandem.server.core import TrainServer
from tandem.server.events import StreamItem
from tandem.server.routes.common import (
    BIG,
    CallAnswersIn,
    CallsAnswered,
    JobDetail,
    JobIdPath,
    JobList,
    JobOut,
    LogsOut,
    ResultsOut,
    SubmitIn,
    TandemJSONResponse,
    UsageOut,
    _answers,
    _job_out,
    _sse,
    err,
)
from tandem.server.usage import usage_dict
from tandem.server.users import AccountStore, claim_run_folder, decide


def jobs_router(server: TrainServer, accounts: AccountStore) -> APIRouter:
    """The job routes and the answers to jobs' questions."""
    app = APIRouter()

    @app.post("/api/jobs", status_code=201, response_model=JobOut,
              responses=_answers(400, 409, 413, 422, 503))
    def submit(body: SubmitIn, request: Request) -> Any:
        user = current_user(request)
        rec = server.submit(
            body.payload, priority=body.priority, tags=body.tags, name=body.name,
            runtime_env=body.runtime_env.model_dump() if body.runtime_env else None,
            owner=user.name, may_assign_owner=user.is_admin,
        )
        note_target(request, f"job {rec.job_id}")
        claim_run_folder(accounts, rec)
        return _job_out(rec, server.live_state(rec.job_id))

    @app.get("/api/jobs", response_model=JobList, responses=_answers(422, 503))
    def list_jobs(
        state: list[JobStatus] | None = Query(None, description="keep jobs in these states"),
        name: str | None = Query(None, max_length=512),
        tag: str | None = Query(None, max_length=256),
        limit: int = Query(100, ge=0, le=10_000),
        offset: int = Query(0, ge=0, le=BIG),
    ) -> Any:
        states = [s.value for s in state] if state else None
        recs = server.store.list_jobs(states=states, name=name, tag=tag, limit=limit,
                                      offset=offset)
        return {"jobs": [_job_out(r, server.live_state(r.job_id)) for r in recs],
                "limit": limit, "offset": offset}

    @app.get("/api/jobs/{job_id}", response_model=JobDetail, responses=_answers(404, 422, 503))
    def get_job(request: Request, job_id: str = JobIdPath) -> Any:
        rec, transitions, live = server.get_settled(job_id)
        out = _job_out(rec, live)
        spec = rec.spec_json or {}
        user = current_user(request)
        if spec.get("env_vars") and not user.is_admin and out["owner"] != user.name:
            # environment variables often hold credentials: only the owner reads values
            spec = {**spec, "env_vars": {k: "(hidden: only its owner and admins see it)"
                                         for k in spec["env_vars"]}}
        out.update(
            traceback=rec.traceback, result=rec.result, spec=spec,
            transitions=[{"from_state": t.from_state, "to_state": t.to_state, "time": t.time,
                          "reason": t.reason or ("submitted" if t.from_state is None else None)}
                         for t in transitions],
        )
        return out

    @app.post("/api/jobs/{job_id}/stop", response_model=JobOut,
              responses=_answers(404, 422, 503))
    def stop_job(
        job_id: str = JobIdPath,
        by: Literal["api", "cli", "dashboard"] = Query(
            "api", description="who asks (recorded as the reason of the STOPPED transition)"),
    ) -> Any:
        server.stop(job_id, by)
        try:
            rec = server.get(job_id)
        except JobStoreError as e:
            return err(503, f"job {job_id} was told to stop (a live job stops now), but its "
                            f"record cannot be read: {e} Its end is stored once the store "
                            f"answers.")
        return _job_out(rec, server.live_state(job_id))

    @app.get("/api/jobs/{job_id}/results", response_model=ResultsOut,
             responses=_answers(404, 422, 503))
    def results(
        job_id: str = JobIdPath,
        after_seq: int = Query(-1, ge=-1, le=BIG),
        limit: int = Query(1000, ge=0, le=100_000),
    ) -> Any:
        server.get(job_id)
        page = server.store.get_reports(job_id, after_seq=after_seq, limit=limit)
        return TandemJSONResponse({
            "job_id": job_id,
            "results": [{"seq": r.seq, "time": r.time, "metrics": r.metrics,
                         "checkpoint_path": r.checkpoint_path} for r in page],
            "next_after_seq": page[-1].seq if page else after_seq,
        })

    @app.get("/api/jobs/{job_id}/outcome", responses={
        **_answers(404, 409, 422, 503),
        200: {"content": {"application/octet-stream": {}},
              "description": "cloudpickle.dumps(JobOutcome)"}})
    def outcome(job_id: str = JobIdPath) -> Response:
        data = server.outcome_bytes(job_id)
        if data is None:
            return err(409, f"job {job_id} has not ended yet; follow /api/jobs/{job_id}/events")
        return Response(data, media_type="application/octet-stream")

    @app.get("/api/jobs/{job_id}/usage", response_model=UsageOut,
             responses=_answers(404, 422, 503))
    def usage(
        job_id: str = JobIdPath,
        rank: int | None = Query(None, ge=0, le=1_000_000),
        since: float | None = Query(None, ge=0, le=1e12),
        limit: int = Query(10_000, ge=0, le=100_000),
    ) -> Any:
        server.get(job_id)
        samples = server.store.get_usage(job_id, rank=rank, since=since, limit=limit)
        return {"job_id": job_id, "samples": [usage_dict(s) for s in samples]}

    @app.get("/api/jobs/{job_id}/logs", response_model=LogsOut, responses={
        **_answers(404, 422, 503),
        200: {"content": {"text/plain": {}}, "description": "with follow=true: a text stream"}})
    async def logs(
        job_id: str = JobIdPath,
        rank: int | None = Query(None, ge=0, le=1_000_000,
                                 description="one rank; default: every rank, lines prefixed"),
        offset: int = Query(0, ge=0, le=BIG, description="byte offset in the rank's log"),
        limit: int = Query(1 << 20, ge=1, le=1 << 24, description="at most this many bytes"),
        follow: bool = Query(False, description="stream new output until the job ends"),
    ) -> Any:
        paths = await run_in_threadpool(server.log_paths, job_id)
        if rank is not None and rank not in paths:
            return err(404, f"job {job_id} has no rank {rank}; its ranks are {sorted(paths)}")
        if follow:
            return StreamingResponse(_follow_logs(server, job_id, paths, rank, offset),
                                     media_type="text/plain; charset=utf-8")
        if rank is not None:
            text, nxt = await run_in_threadpool(_read_from, paths[rank], offset, limit)
            return {"job_id": job_id, "rank": rank, "offset": offset, "next_offset": nxt,
                    "text": text}
        parts: list[str] = []
        for r, p in sorted(paths.items()):
            text, _ = await run_in_threadpool(_read_from, p, 0, limit)
            parts.extend(f"(rank={r}) {line}" for line in text.splitlines())
        text = "\n".join(parts) + ("\n" if parts else "")
        return {"job_id": job_id, "rank": None, "offset": 0, "next_offset": 0, "text": text}

    @app.get("/api/jobs/{job_id}/events", responses={
        **_answers(404, 409, 422, 503),
        200: {"content": {"text/event-stream": {}},
              "description": "events: status, reports, event, end"}})
    async def events(
        job_id: str = JobIdPath,
        after_seq: int = Query(-1, ge=-1, le=BIG, description="send reports after this seq"),
        calls: bool = Query(False, description=(
            "also send the job's questions for its submitter (call events: a tuning trial "
            "waiting for the tuner's verdict); the client answers them through "
            "POST /api/calls")),
    ) -> Any:
        loop = asyncio.get_running_loop()
        for _ in range(20):
            got = server.hub.subscribe(job_id, after_seq, loop, answers_calls=calls)
            if got is not None:
                sub, backlog = got
                return StreamingResponse(_live_events(server, job_id, sub, backlog),
                                         media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            rec = await run_in_threadpool(server.get, job_id)
            if rec.is_terminal:
                return StreamingResponse(_stored_events(server, rec, after_seq),
                                         media_type="text/event-stream",
                                         headers={"Cache-Control": "no-cache"})
            await asyncio.sleep(0.05)  # submitted this instant: not in the hub yet
        return err(409, f"job {job_id} is {rec.state} but not known to the job service")

    @app.post("/api/calls", response_model=CallsAnswered, responses=_answers(422))
    def answer_calls(body: CallAnswersIn, request: Request) -> Any:
        """Answers of the client following jobs to their questions (call events); one
        request carries every answer the client has ready (several trials at once)."""
        user = current_user(request)
        if not user.is_admin:
            for job_id in sorted({a.job_id for a in body.answers}):
                rec = server.store.get_job(job_id)
                owner = job_owner(rec) if rec is not None else user.name
                decision = decide(user, "calls.answer", owner, f"job {job_id}")
                if not decision.allowed:
                    return err(403, decision.reason)
        unknown = [{"job_id": a.job_id, "call_id": a.call_id} for a in body.answers
                   if not server.hub.answer(a.job_id, a.call_id, a.ok, a.value)]
        return {"answered": len(body.answers) - len(unknown), "unknown": unknown}

    return app


# --------------------------------------------------------------------------- streams

async def _live_events(
    server: TrainServer, job_id: str, sub: Any, backlog: list[StreamItem]
) -> AsyncIterator[str]:
    try:
        for item in backlog:
            yield _format(item)
            if item.kind == "end":
                return
        while True:
            try:
                item = await asyncio.wait_for(sub.queue.get(), 15.0)
            except asyncio.TimeoutError:
                yield ": keep-alive\n\n"
                continue
            items = [item]
            while not sub.queue.empty() and len(items) < 10_000:
                items.append(sub.queue.get_nowait())
            for it in _merge_reports(items):
                yield _format(it)
                if it.kind == "end":
                    return
    finally:
        server.hub.unsubscribe(job_id, sub)


def _merge_reports(items: list[StreamItem]) -> list[StreamItem]:
    out: list[StreamItem] = []
    for it in items:
        prev = out[-1] if out else None
        if (it.kind == "reports" and prev is not None and prev.kind == "reports"
                and prev.data["first_seq"] + len(prev.data["rows"]) == it.data["first_seq"]):
            prev.data = {**prev.data, "rows": prev.data["rows"] + it.data["rows"]}
        else:
            out.append(StreamItem(it.kind, dict(it.data), it.payload))
    return out


def _format(item: StreamItem) -> str:
    if item.kind in ("event", "call"):
        try:
            pickled = base64.b64encode(cloudpickle.dumps(item.payload)).decode("ascii")
        except Exception:  # noqa: BLE001 - an event that does not pickle is not sent
            return ""
        return _sse(item.kind, {**item.data, "pickle": pickled})
    return _sse(item.kind, item.data)


async def _stored_events(server: TrainServer, rec: JobRecord, after_seq: int) -> AsyncIterator[str]:
    yield _sse("status", {"job_id": rec.job_id, "state": rec.state})
    after = after_seq
    while True:
        page = await run_in_threadpool(server.store.get_reports, rec.job_id, after, 5000)
        if not page:
            break
        yield _sse("reports", {"job_id": rec.job_id, "first_seq": page[0].seq,
                               "rows": [r.metrics for r in page]})
        after = page[-1].seq
    yield _sse("end", {"job_id": rec.job_id, "state": rec.state, "error": rec.error})


def _read_from(path: str, offset: int, limit: int) -> tuple[str, int]:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(limit)
    except OSError:
        return "", offset
    return data.decode("utf-8", "replace"), offset + len(data)


async def _follow_logs(
    server: TrainServer, job_id: str, paths: dict[int, str], rank: int | None, offset: int
) -> AsyncIterator[str]:
    ranks = [rank] if rank is not None else sorted(paths)
    offsets = {r: (offset if rank is not None else 0) for r in ranks}
    partial = {r: "" for r in ranks}
    while True:
        state = server.live_state(job_id)
        if state is None:
            rec = await run_in_threadpool(server.store.get_job, job_id)
            state = rec.state if rec is not None else "FAILED"
        done = JobStatus(state).is_terminal
        if not paths or set(paths) != set(ranks) and rank is None:
            paths = await run_in_threadpool(server.log_paths, job_id)
            for r in paths:
                if rank is None and r not in offsets:
                    ranks.append(r)
                    offsets[r], partial[r] = 0, ""
        out = []
        for r in ranks:
            if r not in paths:
                continue
            text, offsets[r] = await run_in_threadpool(_read_from, paths[r], offsets[r], 1 << 20)
            if not text:
                continue
            if rank is not None:
                out.append(text)
                continue
            lines = (partial[r] + text).split("\n")
            partial[r] = lines.pop()
            out.extend(f"(rank={r}) {line}\n" for line in lines)
        if out:
            yield "".join(out)
            continue
        if done:
            rest = "".join(f"(rank={r}) {p}\n" for r, p in partial.items() if p)
            if rest:
                yield rest
            return
        await asyncio.sleep(0.2)
