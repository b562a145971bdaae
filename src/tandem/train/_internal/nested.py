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
from typing import Any

import cloudpickle

from tandem.jobs.spec import JobOutcome, JobSpec, JobStatus

_tokens = itertools.count(1)


class _NestedJob:
    """A worker-side mirror of a job running in the driver's service."""

    def __init__(self, spec: JobSpec, callbacks: tuple) -> None:
        self.spec = spec
        self.name = spec.name
        self.job_id = ""
        self.status = JobStatus.PENDING
        self.outcome: JobOutcome | None = None
        self.reports: list[dict] = []
        self.log_paths: dict[int, str] = {}
        self.cond = threading.Condition()
        self._callbacks = callbacks
        self._listener = spec.listener

    def on_event(self, kind: str, data: Any) -> None:
        if kind == "status":
            status, outcome = data
            if outcome is not None:
                # before waking the waiter: what on_end reports must precede the caller's return
                for cb in self._callbacks:
                    hook = getattr(cb, "on_end", None)
                    if hook is not None:
                        hook(outcome.value)
            if self._listener is not None:
                self._listener("status", status)
            with self.cond:
                if outcome is not None:
                    self.outcome = outcome
                self.status = status
                self.cond.notify_all()
            return
        if kind == "reports":
            with self.cond:
                self.reports.extend(data)
                self.cond.notify_all()
            for cb in self._callbacks:
                hook = getattr(cb, "on_report", None)
                if hook is not None:
                    hook(data)
        elif kind == "checkpoint":
            for cb in self._callbacks:
                hook = getattr(cb, "on_checkpoint", None)
                if hook is not None:
                    hook(data)
        if self._listener is not None:
            self._listener(kind, data)


class NestedJobService:
    """``get_service()`` inside a worker process."""

    cluster = None

    def __init__(self, session: Any) -> None:
        self._session = session
        self._jobs: dict[int, _NestedJob] = {}
        self._by_id: dict[str, _NestedJob] = {}
        session.on("job_event", self._on_event)

    def submit(self, spec: JobSpec) -> _NestedJob:
        runner_spec = getattr(spec.runner, "spec", None)
        callbacks = tuple(getattr(runner_spec, "callbacks", ()) or ())
        token = next(_tokens)
        job = _NestedJob(spec, callbacks)
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
        return job

    def stop(self, job_id: str) -> None:
        self._session.call("stop_job", job_id)

    def get(self, job_id: str) -> _NestedJob:
        return self._by_id[job_id]

    def list(self) -> list[_NestedJob]:
        return list(self._by_id.values())

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

    def listener(kind: str, data: Any) -> None:
        if kind == "status":
            outcome = None
            if data.is_terminal:
                ready.wait(10)
                job = holder.get("job")
                outcome = job.outcome if job is not None else None
            data = (data, outcome)
        try:
            worker.send(("job_event", (token, kind, data)))
        except Exception as e:  # noqa: BLE001 - e.g. a result that does not pickle
            if kind == "status" and data[1] is not None:
                o = data[1]
                worker.send(("job_event", (token, kind, (data[0], JobOutcome(
                    o.status, None, o.error or RuntimeError(f"result not transferable: {e}"))))))

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


DRIVER_CALLS = {"submit_job": handle_submit, "stop_job": handle_stop}
