"""Jobs submitted from inside a worker (a tuning trial that fits a Trainer).

Inside a worker, ``get_service()`` returns a ``NestedJobService``: it sends the job spec
to the driver over the worker's channel; the driver submits it to *its* job service, at a
higher priority than the parent, and lends it the parent's resources (the parent only
waits, so it holds no slot: a full cluster never deadlocks). The nested job's events come
back as frames and drive a local mirror of the job, so ``JobHandle`` works unchanged.
"""

from __future__ import annotations

import itertools
import threading
from dataclasses import replace
from typing import Any, Protocol, assert_never, runtime_checkable

import cloudpickle

from tandem._core.errors import JobNotFoundError
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    RankReported,
    Reported,
    StatusChanged,
    from_wire,
    to_wire,
)
from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec
from tandem.jobs.view import DEFAULT_REPORT_WINDOW, JobState, check_report_window
from tandem.train._internal.frames import NoticeFrame, encode
from tandem.train.api.callback import Callback, CallbackDispatcher, CallbackSite
from tandem.train.api.result import Result

_tokens = itertools.count(1)
JOB_EVENT = "job_event"
"""The topic of the ``NoticeFrame`` that carries a nested job's event to its worker:
``(token, kind, payload)`` with ``tandem.jobs.events.to_wire``'s kind and payload (a
status's payload is ``(status, outcome)``)."""


@runtime_checkable
class KeepsCallbacks(Protocol):
    """A runner whose callbacks stay in the worker that submits it (a Trainer's
    ``TrainController``; a Protocol so that this worker-side module does not import the
    driver-side controller)."""

    def without_callbacks(self) -> tuple[JobRunner, tuple[Callback, ...]]: ...

    def run_identity(self) -> tuple[str, str, str | None, str | None]:
        """``(run_name, run_path, trial_id, trial_name)``, what its callbacks' run start
        is told."""
        ...


class NestedJob(JobState):
    """A worker-side view of a job running in the driver's service (a ``JobView``), fed by
    the driver's ``job_event`` frames."""

    def __init__(self, service: NestedJobService, spec: JobSpec,
                 callbacks: tuple[Callback, ...]) -> None:
        super().__init__("", spec.name, report_window=service.report_window)
        self._service = service
        self.spec = spec
        self.callbacks = CallbackDispatcher(callbacks, CallbackSite.WORKER)
        self._listener = spec.listener

    def stop(self) -> None:
        self._service.stop(self.job_id)

    def read_logs(self) -> str:
        return self._service.logs(self.job_id)

    def on_event(self, kind: str, data: Any) -> None:
        """One ``job_event`` frame from the driver: ``(kind, payload)`` as
        ``tandem.jobs.events.to_wire`` makes it, but a status carries its outcome too."""
        if kind == StatusChanged.kind:
            status, outcome = data
            # before waking the waiter: what on_end reports must precede the caller's return
            if outcome is not None and isinstance(outcome.value, Result):
                self.callbacks.end(outcome.value)
            if self._listener is not None:
                self._listener(StatusChanged(status))
            if outcome is not None:
                self._end(outcome)
            elif status.is_terminal:  # the driver could not send the outcome
                self._end(JobOutcome(status))
            else:
                self._change_status(status)
            return
        event = from_wire(kind, data)
        match event:
            case Reported(rows=rows):
                self._add_reports(rows)
                self.callbacks.report(rows)
            case Checkpointed(iteration=iteration, checkpoint=checkpoint, metrics=metrics):
                self.callbacks.checkpoint((iteration, checkpoint, dict(metrics)))
            case StatusChanged() | RankReported():
                pass
            case _:
                assert_never(event)
        if self._listener is not None:
            self._listener(event)


class NestedJobService:
    """``get_service()`` inside a worker process (a ``JobService``)."""

    cluster = None

    def __init__(self, session: Any, report_window: int = DEFAULT_REPORT_WINDOW) -> None:
        self._session = session
        self.report_window = check_report_window(report_window)
        self._jobs: dict[int, NestedJob] = {}
        self._by_id: dict[str, NestedJob] = {}
        session.on(JOB_EVENT, self._on_event)

    def submit(self, spec: JobSpec) -> NestedJob:
        callbacks: tuple[Callback, ...] = ()
        if isinstance(spec.runner, KeepsCallbacks):
            # the run's callbacks stay here (they may tune.report for this trial); the
            # driver runs the job without them, so none runs twice
            runner, callbacks = spec.runner.without_callbacks()
            spec = replace(spec, runner=runner)
        token = next(_tokens)
        job = NestedJob(self, spec, callbacks)
        self._jobs[token] = job
        blob = cloudpickle.dumps(replace(spec, listener=None))
        try:
            job_id, log_paths = self._session.call("submit_job", (token, blob))
        except BaseException:
            self._jobs.pop(token, None)
            raise
        job.job_id = job_id
        job.log_paths = dict(log_paths)
        self._by_id[job_id] = job
        if job.callbacks and isinstance(spec.runner, KeepsCallbacks):
            job.callbacks.run_start(*spec.runner.run_identity())
        return job

    def stop(self, job_id: str) -> None:
        self._session.call("stop_job", job_id)

    def logs(self, job_id: str) -> str:
        """The job's output, read by the driver (which knows where its ranks write)."""
        return str(self._session.call("job_logs", job_id))

    def get(self, job_id: str) -> NestedJob:
        try:
            return self._by_id[job_id]
        except KeyError:
            raise JobNotFoundError(
                f"No job with id {job_id!r} was submitted from this worker; a worker sees only "
                f"the jobs it submitted itself."
            ) from None

    def list(self) -> list[NestedJob]:
        return list(self._by_id.values())

    def forget(self, job_id: str) -> None:
        job = self._by_id.get(job_id)
        if job is not None and job.status.is_terminal:
            del self._by_id[job_id]
            for token, j in list(self._jobs.items()):
                if j is job:
                    del self._jobs[token]

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """The driver's service owns the jobs; nothing to let go of here."""

    def _on_event(self, payload: Any) -> None:
        token, kind, data = payload
        job = self._jobs.get(token)
        if job is not None:
            job.on_event(kind, data)


# -- driver side: handlers for the worker's calls ------------------------------------------

def handle_submit(controller: Any, rank: int, payload: Any, reply: Any) -> None:
    token, blob = payload
    try:
        spec: JobSpec = cloudpickle.loads(blob)
    except Exception as e:  # noqa: BLE001
        reply(False, RuntimeError(f"could not load the nested job spec: {type(e).__name__}: {e}"))
        return
    worker = controller._workers[rank]
    ctx = controller.ctx
    service = ctx.service
    holder: dict[str, Any] = {}
    ready = threading.Event()

    def listener(event: JobEvent) -> None:
        outcome: JobOutcome | None = None
        data: object
        match event:
            case Asked(call=call):  # a question for a submitter inside a worker: not
                call.answer_default()  # forwarded there (the job goes on as if unfollowed)
                return
            case StatusChanged(status=status):
                if status.is_terminal:
                    ready.wait(10)
                    job = holder.get("job")
                    outcome = job.outcome if job is not None else None
                kind, data = StatusChanged.kind, (status, outcome)
            case Reported() | Checkpointed() | RankReported():
                kind, data = to_wire(event)
            case _:
                assert_never(event)
        try:
            worker.send(encode(NoticeFrame(JOB_EVENT, (token, kind, data))))
        except Exception as e:  # noqa: BLE001 - e.g. a result that does not pickle
            if outcome is not None and isinstance(event, StatusChanged):
                worker.send(encode(NoticeFrame(JOB_EVENT, (token, kind, (event.status, JobOutcome(
                    outcome.status, None,
                    outcome.error or RuntimeError(f"result not transferable: {e}")))))))

    spec = replace(spec, listener=listener, priority=ctx.priority + 1)
    try:
        job = service.submit(spec)
    except BaseException as e:  # noqa: BLE001 - the worker raises it
        reply(False, e)
        return
    holder["job"] = job
    ready.set()
    controller._nested_jobs.append(job.job_id)
    if not controller._lent_resources:
        controller._lent_resources = True
        ctx.release_resources()
    reply(True, (job.job_id, dict(job.log_paths)))


def handle_stop(controller: Any, rank: int, payload: Any, reply: Any) -> None:
    try:
        controller.ctx.service.stop(payload)
        reply(True, None)
    except BaseException as e:  # noqa: BLE001
        reply(False, e)


def handle_logs(controller: Any, rank: int, payload: Any, reply: Any) -> None:
    try:
        reply(True, controller.ctx.service.get(payload).read_logs())
    except BaseException as e:  # noqa: BLE001
        reply(False, e)


DRIVER_CALLS = {"submit_job": handle_submit, "stop_job": handle_stop, "job_logs": handle_logs}
