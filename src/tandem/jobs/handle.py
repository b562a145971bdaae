"""``JobHandle``: what ``fit(block=False)`` and ``tandem.jobs.get(job_id)`` return."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

from tandem.jobs.service import Job, LocalJobService, iter_reports


class JobHandle:
    """Follow, wait for and stop one job.

    ``status()`` is one of ``PENDING``, ``RUNNING``, ``RESTARTING``, ``FINISHED``, ``FAILED``,
    ``STOPPED``. ``results()`` yields reports while the job runs. ``wait()`` returns what the
    job produced (a ``Result`` for a train job) or raises its error.
    """

    def __init__(self, job: Job, service: LocalJobService) -> None:
        self._job = job
        self._service = service

    @property
    def job_id(self) -> str:
        return self._job.job_id

    @property
    def name(self) -> str:
        return self._job.name

    def status(self) -> str:
        return self._job.status.value

    def done(self) -> bool:
        return self._job.status.is_terminal

    def results(self) -> Iterator[dict]:
        """Every report (rank 0's), from the first, as it arrives; ends when the job ends."""
        return iter(iter_reports(self._job))

    def wait(self, timeout: float | None = None) -> Any:
        """Blocks until the job ends and returns its value (a ``Result`` for train jobs).

        Raises:
            TimeoutError: the job is still going after ``timeout`` seconds (it keeps running).
            TrainingFailedError: the job failed (for train jobs), with the worker's traceback.
        """
        job = self._job
        deadline = None if timeout is None else time.monotonic() + timeout
        with job.cond:
            while job.outcome is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise TimeoutError(
                        f"Job {job.job_id} ({job.name}) is still {job.status.value} after "
                        f"{timeout} s; it keeps running. Call wait() again or stop() it."
                    )
                job.cond.wait(0.5 if left is None else min(left, 0.5))
            outcome = job.outcome
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def stop(self) -> None:
        """Stops the job (a pending job leaves the queue; a running one's workers are killed)."""
        self._service.stop(self._job.job_id)

    def logs(self) -> str:
        """Each rank's output so far, every line prefixed with its rank."""
        read = getattr(self._job, "read_logs", None)
        if read is not None:  # a job on a train server: its logs come over HTTP
            return read()
        out: list[str] = []
        for rank, path in sorted(self._job.log_paths.items()):
            if not os.path.exists(path):
                continue
            with open(path, errors="replace") as f:
                for line in f:
                    out.append(f"(rank={rank}) {line.rstrip()}")
        return "\n".join(out) + ("\n" if out else "")

    def __repr__(self) -> str:
        return f"JobHandle(job_id={self.job_id!r}, name={self.name!r}, status={self.status()!r})"
