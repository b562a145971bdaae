"""``JobHandle``: what ``fit(block=False)``, ``tandem.train.submit(run)`` and
``tandem.jobs.get(job_id)`` return."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tandem.jobs.contract import JobView
from tandem.jobs.events import ReportRow
from tandem.jobs.view import iter_reports


class JobHandle:
    """Follow, wait for and stop one job — any ``JobView`` (local, on a train server, or
    submitted from inside a worker): the handle only uses the job contract.

    ``status()`` is one of ``PENDING``, ``RUNNING``, ``RESTARTING``, ``FINISHED``, ``FAILED``,
    ``STOPPED``. ``results()`` yields reports while the job runs. ``wait()`` returns what the
    job produced (a ``Result`` for a train job) or raises its error.
    """

    def __init__(self, job: JobView, service: object = None) -> None:
        # ``service`` is accepted for older callers; the view reaches its service itself.
        self._job = job

    @property
    def job(self) -> JobView:
        """The job's view (``tandem.jobs.contract.JobView``)."""
        return self._job

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

    def results(self) -> Iterator[ReportRow]:
        """Every report (rank 0's), from the first still in memory, as it arrives; ends
        when the job ends."""
        return iter_reports(self._job)

    def wait(self, timeout: float | None = None) -> Any:
        """Blocks until the job ends and returns its value (a ``Result`` for train jobs).

        Raises:
            TimeoutError: the job is still going after ``timeout`` seconds (it keeps running).
            TrainingFailedError: the job failed (for train jobs), with the worker's traceback.
        """
        outcome = self._job.wait_outcome(timeout)
        if outcome is None:
            raise TimeoutError(
                f"Job {self.job_id} ({self.name}) is still {self.status()} after "
                f"{timeout} s; it keeps running. Call wait() again or stop() it."
            )
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def stop(self) -> None:
        """Stops the job (a pending job leaves the queue; a running one's workers are killed)."""
        self._job.stop()

    def logs(self) -> str:
        """Each rank's output so far, every line prefixed with its rank."""
        return self._job.read_logs()

    def __repr__(self) -> str:
        return f"JobHandle(job_id={self.job_id!r}, name={self.name!r}, status={self.status()!r})"
