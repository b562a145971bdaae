"""The job contract: what a job view and a job service offer, written down as types.

Every way to reach a job implements these ``Protocol``s, and ``JobHandle`` /
``iter_reports`` / ``get_service()`` are typed with them (mypy fails a class that does
not meet them; ``tandem.jobs.testing.service_conformance`` checks that they behave alike):

- ``LocalJobService`` and its ``Job`` (this process; over a ``LocalCluster`` or a
  ``RayCluster``; also what a train server runs),
- ``RemoteJobService`` / ``RemoteJob`` (a train server, over HTTP and server-sent events),
- ``NestedJobService`` / ``NestedJob`` (inside a worker: a job submitted to the driver's
  service, e.g. a tuning trial that fits a Trainer).

The views share their state-keeping in ``tandem.jobs.view.JobState``: what differs is only
how the state is fed (the service's job thread, an event stream, frames from the driver)
and how ``stop`` / ``read_logs`` reach the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from tandem._core.records import record
from tandem.jobs.spec import JobOutcome, JobSpec, JobStatus

__all__ = ["ClusterView", "JobService", "JobView", "ReportWindow"]


@record
class ReportWindow:
    """What ``JobView.read_reports`` returns.

    Reports are numbered from 0 in the order the job published them. A view keeps a bounded
    window of the latest reports in memory (the oldest are dropped past its window size; all
    of them are in the run folder's ``result.json``), so ``first`` may be larger than the
    index asked for: the reports between were dropped.

    Attributes:
        first: the number of ``rows[0]`` (the index asked for, or the oldest still kept).
        rows: the reports from ``first`` on, as many as are known now (may be empty).
        ended: the job is over and ``rows`` reach its last report: nothing more will come.
    """

    first: int
    rows: list[dict]
    ended: bool

    @property
    def next(self) -> int:
        """The number of the report after the last of ``rows``."""
        return self.first + len(self.rows)


@runtime_checkable
class JobView(Protocol):
    """One job, as whoever follows it sees it. Thread-safe; every method may block briefly
    on I/O (a remote view asks the server).

    ``status`` moves ``PENDING -> RUNNING (-> RESTARTING -> RUNNING)* -> FINISHED | FAILED |
    STOPPED``; ``outcome`` is None until the job is over, then never changes.
    """

    @property
    def job_id(self) -> str:
        """The service's id for the job."""
        ...

    @property
    def name(self) -> str:
        """The job's name (a train run's name)."""
        ...

    @property
    def status(self) -> JobStatus:
        """The job's state now."""
        ...

    @property
    def outcome(self) -> JobOutcome | None:
        """The terminal status, value (a ``Result`` for train jobs) and error; None while
        the job runs."""
        ...

    def read_reports(self, start: int, timeout_s: float | None) -> ReportWindow:
        """The reports numbered ``start`` and after. Blocks until there is at least one, or
        the job is over, or ``timeout_s`` passed (then ``rows`` may be empty)."""
        ...

    def wait_outcome(self, timeout_s: float | None) -> JobOutcome | None:
        """Blocks until the job is over (returns its outcome) or ``timeout_s`` passed
        (returns None; the job keeps running)."""
        ...

    def read_logs(self) -> str:
        """Each rank's output so far, every line prefixed with ``(rank=N)``."""
        ...

    def stop(self) -> None:
        """Stops the job: a pending job leaves the queue, a running one's workers are
        killed. Stopping a job that is over does nothing."""
        ...


@runtime_checkable
class ClusterView(Protocol):
    """What a job service tells about the machines it places jobs on."""

    def resources(self) -> dict[str, float]:
        """Total logical resources (``{"CPU": 8, "GPU": 1, ...}``)."""
        ...

    def available(self) -> dict[str, float]:
        """Resources not held by running jobs."""
        ...

    def check_feasible(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        """Raises ``ResourcesUnavailableError`` for a gang that could never be placed."""
        ...

    def prewarm(self, preload: Sequence[str] = ()) -> None:
        """Gets ready to start workers quickly (imports ``preload`` where they fork from)."""
        ...


@runtime_checkable
class JobService(Protocol):
    """Where jobs are submitted: queues them, gang-schedules them, tells about them.

    Thread-safe. ``submit`` refuses at once a job that could never fit (``ConfigError`` /
    ``ResourcesUnavailableError``), before anything starts.
    """

    @property
    def cluster(self) -> ClusterView | None:
        """The resources jobs run on; None where the service cannot tell (nested)."""
        ...

    def submit(self, spec: JobSpec) -> JobView:
        """Queues a job and returns its view at once. Its ``spec.listener`` hears the job's
        events and its questions (``JobCall``, from ``JobContext.ask``), wherever the job
        runs: the local and the remote service deliver both, and an answer reaches the job;
        the nested service answers questions with their default."""
        ...

    def get(self, job_id: str) -> JobView:
        """The job with this id. Raises ``JobNotFoundError`` for an unknown id."""
        ...

    def list(self) -> Sequence[JobView]:
        """The jobs the service knows (a remote service: its history too)."""
        ...

    def stop(self, job_id: str) -> None:
        """Stops the job (see ``JobView.stop``)."""
        ...

    def forget(self, job_id: str) -> None:
        """Drops the record of a job that is over, if the service keeps records in memory."""
        ...

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stops what this service runs in this process and lets go of its resources (a
        remote service closes its connection; the server's jobs keep running)."""
        ...
