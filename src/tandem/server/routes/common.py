"""What the train server's routers share: the JSON response, the request and answer
models (they make the OpenAPI document), the documented error answers, ``err``."""

from __future__ import annotations

import math
from typing import Any

from fastapi import Path
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, field_validator

from tandem.jobs.store import JobRecord
from tandem.jobs.store.base import encode_json
from tandem.server.access import job_owner
from tandem.server.core import SpecError
from tandem.server.loader import check_env_vars
from tandem.server.vocabulary import shown_job_state, stored_preemptions

JobIdPath = Path(..., min_length=1, max_length=128, description="a job id, e.g. job_1a2b3c4d5e6f_0001")
BIG = 2**62


class TandemJSONResponse(JSONResponse):
    """JSON that keeps NaN and infinities in metrics (as Python's json does)."""

    def render(self, content: object) -> bytes:
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
    preemptions: int = 0


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


def _job_out(rec: JobRecord, live: str | None = None) -> dict[str, object]:
    state = shown_job_state(live or rec.state, (rec.spec_json or {}).get("metadata"))
    return {
        "job_id": rec.job_id, "name": rec.name, "owner": job_owner(rec), "state": state,
        "priority": rec.priority, "tags": list(rec.tags), "submitted_at": rec.submitted_at,
        "started_at": rec.started_at, "ended_at": rec.ended_at, "error": rec.error,
        "preemptions": stored_preemptions(rec),
    }


class ErrorOut(BaseModel):
    detail: Any


def _answers(*codes: int) -> dict[int | str, dict[str, object]]:
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


def _finite(value: object) -> object:
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


def _sse(kind: str, data: dict[str, object]) -> str:
    return f"event: {kind}\ndata: {encode_json(data)}\n\n"


# --------------------------------------------------------------------------- the app


def err(status: int, detail: object) -> TandemJSONResponse:
    """An error answer: ``{"detail": ...}`` with ``status``."""
    return TandemJSONResponse({"detail": detail}, status_code=status)
