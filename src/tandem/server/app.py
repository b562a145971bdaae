"""The HTTP API of the train server (FastAPI). ``create_app(server, token)`` builds it.

=========================================  =============================================
``GET  /api/health``                       version, pid, limits
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
``GET  /api/cluster``                      resources, what is free, running jobs' usage
``PUT  /api/packages/{id}``                upload a working_dir (zip)
``/api/me``, ``/api/users``, ``/api/audit``, ``/api/quotas``: users, the audit log and
quotas (``users_api.py``); who may do what: ``access.py``
``GET  /``                                 the dashboard (``dashboard/``; login at ``/login``)
=========================================  =============================================

Every request needs ``Authorization: Bearer <token>`` (see ``auth.py``): the server's own
token (the admin's) or a user's (``tandem users add``).
"""

from __future__ import annotations

import asyncio
import base64
import math
import os
from collections.abc import AsyncIterator
from typing import Any, Literal

import cloudpickle
from fastapi import FastAPI, Path, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tandem._core.errors import ConfigError, JobNotFoundError, ResourcesUnavailableError
from tandem.jobs.spec import JobStatus
from tandem.jobs.store import JobRecord, JobStoreError
from tandem.jobs.store.base import encode_json
from tandem.server.access import AccessControl, current_user, job_owner, note_target
from tandem.server.auth import TokenAuth
from tandem.server.core import (
    OwnerMismatchError,
    PayloadError,
    RunFolderBusyError,
    SpecError,
    TrainServer,
    UploadTooLargeError,
)
from tandem.server.events import StreamItem
from tandem.server.loader import check_env_vars
from tandem.server.models_api import add_model_routes
from tandem.server.routes_team import register_team_routes
from tandem.server.usage import usage_dict
from tandem.server.users import accounts_store, claim_run_folder, decide
from tandem.server.users_api import apply_stored_quotas, users_router
from tandem.server.vocabulary import shown_job_state

JobIdPath = Path(..., min_length=1, max_length=128, description="a job id, e.g. job_1a2b3c4d5e6f_0001")
BIG = 2**62


class TandemJSONResponse(JSONResponse):
    """JSON that keeps NaN and infinities in metrics (as Python's json does)."""

    def render(self, content: Any) -> bytes:
        return encode_json(content).encode("utf-8")


# --------------------------------------------------------------------------- models


class RuntimeEnvIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    working_dir: str | None = Field(
        None, pattern=r"^[0-9a-f]{16,64}$",
        description="id of a package uploaded with PUT /api/packages/{id}")
    env_vars: dict[str, str] = Field(
        default_factory=dict,
        description="set in every worker: names of letters, digits and '_' (not starting "
                    "with a digit), values without NUL bytes")

    @field_validator("env_vars")
    @classmethod
    def _valid_env(cls, v: dict[str, str]) -> dict[str, str]:
        try:
            check_env_vars(v, ("env_vars",))
        except SpecError as e:
            raise ValueError(str(e)) from None
        return v


class SubmitIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    payload: str = Field(..., min_length=1,
                         description="base64 of cloudpickle.dumps(JobSpec) without its listener")
    priority: int | None = Field(None, ge=-(2**31), le=2**31 - 1,
                                 description="higher runs first (default: the spec's)")
    tags: list[str] = Field(default_factory=list, max_length=64)

    @field_validator("tags")
    @classmethod
    def _valid_tags(cls, v: list[str]) -> list[str]:
        for t in v:
            if not t or len(t) > 256 or "\x00" in t:
                raise ValueError(f"tag {t!r:.80} is not a non-empty string of at most 256 "
                                 f"characters without NUL bytes")
        return v
    name: str | None = Field(None, min_length=1, max_length=256)
    runtime_env: RuntimeEnvIn | None = None


class CallAnswerIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job_id: str = Field(..., min_length=1, max_length=128)
    call_id: int = Field(..., ge=1, le=BIG)
    ok: bool = Field(True, description="false: the job raises value as an error")
    value: str | None = Field(None, max_length=65_536,
                              description="the answer (a tuning verdict: continue / stop)")


class CallAnswersIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answers: list[CallAnswerIn] = Field(..., max_length=10_000)


class CallRef(BaseModel):
    job_id: str
    call_id: int


class CallsAnswered(BaseModel):
    answered: int
    unknown: list[CallRef] = Field(
        description="questions no longer open (answered already, or the job ended)")


class JobOut(BaseModel):
    job_id: str
    name: str
    owner: str | None = None
    state: str
    priority: int
    tags: list[str]
    submitted_at: float
    started_at: float | None = None
    ended_at: float | None = None
    error: str | None = None


class TransitionOut(BaseModel):
    from_state: str | None
    to_state: str
    time: float
    reason: str | None = None


class JobDetail(JobOut):
    traceback: str | None = None
    result: dict[str, Any] | None = None
    spec: dict[str, Any] = Field(default_factory=dict)
    transitions: list[TransitionOut] = Field(default_factory=list)


class JobList(BaseModel):
    jobs: list[JobOut]
    limit: int
    offset: int


class ReportOut(BaseModel):
    seq: int
    time: float
    metrics: dict[str, Any]
    checkpoint_path: str | None = None


class ResultsOut(BaseModel):
    job_id: str
    results: list[ReportOut]
    next_after_seq: int


class LogsOut(BaseModel):
    job_id: str
    rank: int | None
    offset: int
    next_offset: int
    text: str


class UsageOut(BaseModel):
    job_id: str
    samples: list[dict[str, Any]]


class PackageOut(BaseModel):
    package_id: str
    created: bool


def _job_out(rec: JobRecord, live: str | None = None) -> dict[str, Any]:
    state = shown_job_state(live or rec.state, (rec.spec_json or {}).get("metadata"))
    return {
        "job_id": rec.job_id, "name": rec.name, "owner": job_owner(rec), "state": state,
        "priority": rec.priority, "tags": list(rec.tags), "submitted_at": rec.submitted_at,
        "started_at": rec.started_at, "ended_at": rec.ended_at, "error": rec.error,
    }


class ErrorOut(BaseModel):
    detail: Any


def _answers(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route really gives, for the OpenAPI document."""
    what = {
        400: "the request body could not be read",
        401: "missing or wrong token",
        404: "no such job (or rank)",
        409: "conflict: the job has not ended yet, or a live job holds the run folder",
        413: "the body is over the server's limit (--max-upload-mb)",
        422: "invalid input: the field and the reason are named",
        503: "the job store is unreachable; the reason is given, retry later",
    }
    return {c: {"model": ErrorOut, "description": what[c]} for c in (401, *codes)}


def _finite(value: Any) -> Any:
    """``value`` with non-finite floats spelled as strings (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    if isinstance(value, (str, int, bool)) or value is None:
        return value
    return repr(value)


def _sse(kind: str, data: dict[str, Any]) -> str:
    return f"event: {kind}\ndata: {encode_json(data)}\n\n"


# --------------------------------------------------------------------------- the app


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
    accounts = accounts_store(server, token)
    apply_stored_quotas(server, accounts)

    def err(status: int, detail: Any) -> TandemJSONResponse:
        return TandemJSONResponse({"detail": detail}, status_code=status)

    @app.exception_handler(JobNotFoundError)
    async def _not_found(_: Request, e: JobNotFoundError) -> Response:
        return err(404, str(e))

    @app.exception_handler(UploadTooLargeError)
    async def _too_large(_: Request, e: UploadTooLargeError) -> Response:
        return err(413, str(e))

    @app.exception_handler(PayloadError)
    async def _payload(_: Request, e: PayloadError) -> Response:
        return err(422, [{"loc": ["body", "payload"], "msg": str(e), "type": "payload_error"}])

    @app.exception_handler(SpecError)
    async def _spec(_: Request, e: SpecError) -> Response:
        loc = list(e.loc) if e.loc and e.loc[0] == "body" else ["body", *e.loc]
        return err(422, [{"loc": loc, "msg": str(e), "type": "value_error"}])

    @app.exception_handler(OwnerMismatchError)
    async def _owner(_: Request, e: OwnerMismatchError) -> Response:
        return err(403, str(e))

    @app.exception_handler(RunFolderBusyError)
    async def _busy(_: Request, e: RunFolderBusyError) -> Response:
        return err(409, str(e))

    @app.exception_handler(JobStoreError)
    async def _store(_: Request, e: JobStoreError) -> Response:
        return err(503, f"{e} The request was not carried out; try again once the store "
                        f"answers (GET /api/health says when).")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> Response:
        errors = []
        for d in e.errors():
            d = {k: v for k, v in d.items() if k in ("loc", "msg", "type", "input")}
            errors.append(_finite(d))
        return err(422, errors)

    @app.exception_handler(RecursionError)
    async def _too_deep(_: Request, e: RecursionError) -> Response:
        # Deeply nested JSON exhausts Python's recursion while it is read, checked or
        # written back: the client's input, not a server fault (the connection stays up).
        return err(400, "the request is nested too deeply for this server to read; send "
                        "JSON nested at most a few dozen levels.")

    @app.exception_handler(ConfigError)
    async def _config(_: Request, e: ConfigError) -> Response:
        return err(422, str(e))

    @app.exception_handler(ResourcesUnavailableError)
    async def _resources(_: Request, e: ResourcesUnavailableError) -> Response:
        return err(422, str(e))

    # ----------------------------------------------------------------- service

    @app.get("/api/health", responses={
        503: {"model": ErrorOut, "description": "the job store is unreachable (reason given)"},
        401: {"model": ErrorOut, "description": "missing or wrong token"}})
    def health() -> Any:
        problem = server.store_problem()
        out = {"status": "ok" if problem is None else "store_unavailable",
               "version": __version__, "pid": os.getpid(),
               "started_at": server.started_at, "max_upload_bytes": limit_bytes,
               "store": getattr(server.store, "url", type(server.store).__name__),
               "store_backlog": server.writer.backlog}
        if problem is not None:
            out["reason"] = problem
            return TandemJSONResponse(out, status_code=503)
        return out

    @app.get("/api/cluster", responses=_answers())
    def cluster() -> dict[str, Any]:
        return server.cluster_info()

    @app.put("/api/packages/{package_id}", response_model=PackageOut,
             responses=_answers(413, 422))
    async def put_package(
        request: Request,
        package_id: str = Path(..., pattern=r"^[0-9a-f]{16,64}$"),
    ) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
            return err(413, server._too_large(int(declared)))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit_bytes:
                return err(413, server._too_large(size))
            chunks.append(chunk)
        created = await run_in_threadpool(server.add_package, package_id, b"".join(chunks))
        return {"package_id": package_id, "created": created}

    # ----------------------------------------------------------------- jobs

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
        rec, live = server.get_settled(job_id)
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
                         for t in server.store.transitions(job_id)],
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

    # ----------------------------------------------------------------- dashboard

    from tandem.server.dashboard import DashboardGate, mount

    add_model_routes(app, server)  # /api/models... (the model registry)
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

        async def counted_receive() -> Any:
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
