"""Event projection: what the server makes of a job's events.

The job service calls ``EventProjection.on_job_event`` on the job's thread, in order. It
projects each event onto the store (through the ``StoreWriter``: state changes, reports,
the result summary) and onto event streams (the ``EventHub``), and keeps the pickled
outcome of recently ended jobs for clients waiting on them. A job's end is written once:
its summary, then its terminal state; only once both are stored does the server forget
the live job (until then, reads of it come from memory).
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any, assert_never

import cloudpickle

from tandem._core.errors import TandemError
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    RankReported,
    Reported,
    StatusChanged,
    to_wire,
)
from tandem.jobs.service import Job
from tandem.jobs.spec import JobOutcome, JobStatus
from tandem.jobs.store import JobRecord, ReportRecord, UsageSample
from tandem.server.events import EventHub
from tandem.server.writer import StoreWriter
from tandem.train.api.errors import WORKER_ERRORS_HEADER

__all__ = ["EventProjection", "jsonable", "outcome_from_record"]

_OUTCOMES_KEPT = 2000


class EventProjection:
    """Server jobs' events → store ops and stream items. Thread-safe.

    Args:
        writer: the store writer.
        hub: the event hub of live jobs.
        forget: called with a job id once its end is stored (the service drops the job).
    """

    def __init__(self, writer: StoreWriter, hub: EventHub,
                 forget: Callable[[str], None]) -> None:
        self.writer = writer
        self.hub = hub
        self._forget = forget
        self._lock = threading.Lock()
        self._summaries: dict[str, dict[str, Any]] = {}
        self._outcomes: OrderedDict[str, bytes | None] = OrderedDict()
        self._stopped_by: dict[str, str] = {}
        self.detached = False

    # ----------------------------------------------------------------- tracking

    def track(self, job_id: str, summary: Mapping[str, object]) -> None:
        with self._lock:
            self._summaries[job_id] = dict(summary)

    def untrack(self, job_id: str) -> None:
        with self._lock:
            self._summaries.pop(job_id, None)

    def tracks(self, job_id: str) -> bool:
        return job_id in self._summaries

    def note_stop(self, job_id: str, by: str) -> None:
        """Remembers who asked a job to stop (the reason its STOPPED transition carries)."""
        with self._lock:
            if job_id in self._summaries:
                self._stopped_by.setdefault(job_id, by)

    def outcome(self, job_id: str) -> bytes | None:
        with self._lock:
            return self._outcomes.get(job_id)

    # ----------------------------------------------------------------- events

    def on_job_event(self, job: Job, event: JobEvent) -> None:
        """The service's subscriber: called on the job's thread, in order."""
        job_id = job.job_id
        if self.detached or job_id not in self._summaries:
            return  # not a server job: a nested job a worker started (untracked)
        now = time.time()
        match event:
            case StatusChanged(status=status):
                if status.is_terminal:
                    self._on_end(job, status, now)
                    return
                if status is JobStatus.PENDING:
                    return  # recorded at submission (or at re-queue)
                if status is JobStatus.RESTARTING:
                    self._note_preemptions(job)
                self.writer.put(("state", job_id, status.value, now, None, None,
                                 job.status_reason))
                self.hub.status(job_id, status.value, now)
            case Reported(rows=rows):
                first = self.hub.reports(job_id, rows)
                if first < 0:
                    return
                self.writer.put(("reports", job_id, [
                    ReportRecord(job_id, first + i, row, now, 0) for i, row in enumerate(rows)
                ]))
                summary = self._summaries.get(job_id)
                if summary is not None and "log_paths" not in summary and job.log_paths:
                    summary["log_paths"] = {str(r): p for r, p in job.log_paths.items()}
                    self.writer.put(("update", job_id, {"result": dict(summary)}))
            case Checkpointed():
                self._on_checkpoint(job_id, event)
                self.hub.event(job_id, *to_wire(event))
            case RankReported():
                self.hub.event(job_id, *to_wire(event))
            case Asked():
                pass  # questions go to the job's listener or the call router, not here
            case _:
                assert_never(event)

    def on_usage(self, samples: list[UsageSample]) -> None:
        self.writer.put(("usage", samples))

    def _on_checkpoint(self, job_id: str, event: Checkpointed) -> None:
        path, iteration = str(event.checkpoint.path), event.iteration
        summary = self._summaries.get(job_id)
        if summary is None:
            return
        summary["checkpoint_path"] = path
        summary["checkpoint_iteration"] = iteration
        summary.setdefault("checkpoints", []).append(path)
        self.writer.put(("update", job_id, {"result": dict(summary)}))

    def _note_preemptions(self, job: Job) -> None:
        """A new preemption's count goes into the job's stored summary at once: the job
        lists read it from there, while the job waits and after it ends."""
        summary = self._summaries.get(job.job_id)
        n = job.num_preemptions
        if summary is None or n <= summary.get("preemptions", 0):
            return
        summary["preemptions"] = n
        self.writer.put(("update", job.job_id, {"result": dict(summary)}))

    def _on_end(self, job: Job, status: JobStatus, now: float) -> None:
        job_id = job.job_id
        outcome = job.outcome or JobOutcome(status)
        summary = dict(self._summaries.get(job_id) or {})
        if job.num_preemptions > summary.get("preemptions", 0):
            summary["preemptions"] = job.num_preemptions  # kept once it ended
        if job.log_paths:
            summary["log_paths"] = {str(r): p for r, p in job.log_paths.items()}
        value = outcome.value
        metrics = getattr(value, "metrics", None)
        if isinstance(metrics, dict):
            summary["metrics"] = jsonable(metrics)
        ckpt = getattr(value, "checkpoint", None)
        if ckpt is not None and getattr(ckpt, "path", None):
            summary["checkpoint_path"] = str(ckpt.path)
        if getattr(value, "path", None):
            summary["path"] = str(value.path)
        error = tb = None
        if outcome.error is not None:
            err = outcome.error
            error = str(err).split("\n\nWorker traceback", 1)[0]
            tb = getattr(err, "worker_traceback", None) or "".join(
                traceback.format_exception(type(err), err, err.__traceback__))
        try:
            pickled: bytes | None = cloudpickle.dumps(outcome)
        except Exception:  # noqa: BLE001
            pickled = None
        with self._lock:
            self._outcomes[job_id] = pickled
            while len(self._outcomes) > _OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
            stopped_by = self._stopped_by.pop(job_id, None)
        reason = _end_reason(status, error, stopped_by, job.started_time)
        self.writer.put(("update", job_id, {"result": summary}))
        self.writer.put(("state", job_id, status.value, now, error, tb, reason))
        self.hub.status(job_id, status.value, now)
        self.hub.end(job_id, status.value, error)
        self.writer.put(("call", lambda: self._after_stored(job_id)))

    def _after_stored(self, job_id: str) -> None:
        self.hub.drop(job_id)
        self._forget(job_id)
        self.untrack(job_id)


_STOPPED_BY = {"api": "through the API", "cli": "with `tandem jobs stop`",
               "dashboard": "from the dashboard"}


def _end_reason(status: JobStatus, error: str | None, stopped_by: str | None,
                started_time: float | None) -> str:
    """Why a job ended, as its last transition records it."""
    if status is JobStatus.FAILED:
        first = (error or "").strip().splitlines()
        if first and first[0].strip() == WORKER_ERRORS_HEADER:  # Ray's header: what follows says it
            first = first[1:]
        return f"failed: {first[0]}" if first else "failed (no error message)"
    if status is JobStatus.STOPPED:
        what = "cancelled while pending" if started_time is None else "stopped"
        if stopped_by is None:
            return f"{what} (by the job itself or a server shutdown)"
        return f"{what} {_STOPPED_BY.get(stopped_by, 'by ' + stopped_by)}"
    return "finished: the job's function returned"


def jsonable(d: Mapping[str, object]) -> dict[str, object]:
    from tandem.jobs.store.base import normalize_json

    try:
        out: dict[str, Any] = normalize_json(d)
        return out
    except TypeError:
        return {k: (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v))
                for k, v in d.items()}


def outcome_from_record(rec: JobRecord) -> JobOutcome:
    """A ``JobOutcome`` rebuilt from the store (jobs that ended under an earlier server)."""
    status = JobStatus(rec.state)
    summary = rec.result or {}
    error: BaseException | None = None
    if status is JobStatus.FAILED:
        error = TandemError(rec.error or "the job failed")
    if rec.spec_json.get("runner") == "TrainController":
        from tandem.train.api.checkpoint import Checkpoint
        from tandem.train.api.errors import TrainingFailedError
        from tandem.train.api.result import Result

        if status is JobStatus.FAILED:
            error = TrainingFailedError(rec.error or "the job failed",
                                        worker_traceback=rec.traceback)
        path = summary.get("checkpoint_path")
        value: Any = Result(
            metrics=summary.get("metrics"),
            checkpoint=Checkpoint(path) if path else None,
            path=summary.get("path") or "",
            error=error,
            best_checkpoints=[(Checkpoint(p), {}) for p in summary.get("checkpoints", [])],
        )
        return JobOutcome(status, value=value, error=error)
    return JobOutcome(status, value=None, error=error)
