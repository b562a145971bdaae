"""What a job is to the job service: a gang of resource bundles and a runner."""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import field
from typing import TYPE_CHECKING, Any, Protocol

from tandem._core.records import record
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobCall,
    JobListener,
    JobStatus,
    RankReported,
    ReportRow,
)

if TYPE_CHECKING:
    from tandem.cluster.base import Cluster, Placement

__all__ = [
    "JobCall",
    "JobContext",
    "JobHost",
    "JobOutcome",
    "JobRunner",
    "JobSpec",
    "JobStatus",
    "JobSubmitter",
    "PreemptionRequest",
    "SubmittedJob",
]


@record
class JobOutcome:
    """What a runner returns: the terminal status, a value for ``wait()``, and the error if any."""

    status: JobStatus
    value: Any = None
    error: BaseException | None = None


@record
class PreemptionRequest:
    """What the service tells a job it preempts.

    Attributes:
        reason: why, in words (``"preempted for job_x (priority 5 > 0)"``).
        deadline: wall-clock time (``time.time()``) by which the job should have yielded.
        for_job: the job it yields to.
    """

    reason: str
    deadline: float
    for_job: str | None = None


class SubmittedJob(Protocol):
    """What a running job sees of a job it submitted to its service (a nested job)."""

    @property
    def job_id(self) -> str: ...

    @property
    def outcome(self) -> JobOutcome | None: ...

    @property
    def log_paths(self) -> dict[int, str]: ...

    def read_logs(self) -> str: ...


class JobSubmitter(Protocol):
    """The part of the job service a running job reaches: to submit, follow and stop the
    jobs it starts itself (``tandem.jobs.service.LocalJobService`` is one)."""

    def submit(self, spec: JobSpec, job_id: str | None = None) -> SubmittedJob: ...

    def get(self, job_id: str) -> SubmittedJob: ...

    def stop(self, job_id: str) -> None: ...


class JobHost(Protocol):
    """The service's record of a running job, as its ``JobContext`` reaches it
    (``tandem.jobs.service.Job`` is the one). A Protocol, so that what a job is (this
    module) does not import the service that runs it."""

    @property
    def job_id(self) -> str: ...

    @property
    def priority(self) -> int: ...

    @property
    def spec(self) -> JobSpec: ...

    log_paths: dict[int, str]

    @property
    def service(self) -> JobSubmitter: ...

    def _set_status(self, status: JobStatus, reason: str | None = None) -> None: ...

    def _publish(self, reports: list[dict]) -> None: ...

    def _emit(self, event: Checkpointed | RankReported) -> None: ...

    def _route_call(self, kind: str, call: JobCall) -> bool:
        """Hands a question to the service's call router (a train server's event stream);
        False when there is none or it does not take it."""
        ...

    def _replace_placement(self) -> Placement | None: ...

    def _spare_bundles(self, bundle: Mapping[str, float], most: int) -> int: ...

    def _resize(self, num_bundles: int) -> Placement | None: ...

    def _release_early(self) -> None: ...


class JobContext:
    """What the service gives a runner while its job runs. Created by the service."""

    def __init__(self, job: JobHost, cluster: Cluster, placement: Placement) -> None:
        self._job = job
        self.job_id: str = job.job_id
        self.cluster = cluster
        self.placement = placement
        self.stop_event = threading.Event()

    def set_status(self, status: JobStatus, reason: str | None = None) -> None:
        """Marks the job RUNNING or RESTARTING (the service sets terminal states); ``reason``
        says why (a train server records it with the transition)."""
        self._job._set_status(status, reason)

    def publish(self, reports: list[ReportRow]) -> None:
        """Makes reports visible to ``JobHandle.results()`` and to listeners."""
        self._job._publish(reports)

    @property
    def service(self) -> JobSubmitter:
        """The job service running this job (to submit nested jobs to)."""
        return self._job.service

    @property
    def priority(self) -> int:
        return self._job.priority

    def emit(self, event: Checkpointed | RankReported) -> None:
        """Passes an event of the run (a committed checkpoint, a rank's reports) to the
        job's listener and subscribers."""
        self._job._emit(event)

    def ask(self, kind: str, payload: object, reply: Callable[[bool, object], None],
            default: object = None) -> None:
        """Asks the job's submitter (see ``JobCall``); ``reply`` gets the answer, from
        another thread, or ``default`` at once when nobody can answer."""
        call = JobCall(payload, reply, default)
        listener = self._job.spec.listener
        if listener is not None:
            listener(Asked(kind, call))
            return
        if self._job._route_call(kind, call):
            return
        call.answer_default()

    def set_log_paths(self, paths: Mapping[int, str]) -> None:
        """Tells the service where each rank's output goes (for ``JobHandle.logs()``)."""
        self._job.log_paths = dict(paths)

    def replace_placement(self) -> bool:
        """Gives the job's placement back and blocks until the scheduler places the gang
        again (the job waits in the queue like a pending one, holding nothing).

        Used after a node of the placement was lost. Returns False if the job was stopped
        (or the service shut down) while it waited; ``self.placement`` is then stale.
        """
        placement = self._job._replace_placement()
        if placement is None:
            return False
        self.placement = placement
        return True

    def spare_bundles(self, bundle: Mapping[str, float], most: int) -> int:
        """How many more bundles like ``bundle`` (up to ``most``) the cluster could give this
        job now without anyone waiting for them (0 while other jobs are queued)."""
        return self._job._spare_bundles(bundle, most)

    def resize(self, num_bundles: int) -> bool:
        """Re-places the job's gang with ``num_bundles`` of its bundles (between
        ``min_bundles`` and all), giving its placement back first. Called between two gangs
        (no worker running). Returns False, keeping a gang of the old size, when the new
        one does not fit; ``self.placement`` is the placement to run on either way."""
        placement = self._job._resize(num_bundles)
        if placement is None:
            return False
        self.placement = placement
        return len(placement.bundles) == num_bundles

    def release_resources(self) -> None:
        """Gives the job's resources back early: the job keeps running without a slot.

        Used when a job only waits on a nested job it submitted (a tuning trial that fits
        a Trainer), so the nested job can use the slot and a full cluster never deadlocks.
        """
        self._job._release_early()


class JobRunner(ABC):
    """Runs one job once the service has placed its gang.

    ``run`` is called on a thread of its own, blocks until the job ends and returns a
    ``JobOutcome``; raising is a failure. ``stop`` may be called from any thread, at any
    time, and must make ``run`` return soon (with ``JobStatus.STOPPED``).

    What a train server asks of a runner beyond this (checking a job's code loads, applying
    its runtime_env, resuming after a server restart) is in ``tandem.server.runner_hooks``.
    """

    @abstractmethod
    def run(self, ctx: JobContext) -> JobOutcome:
        """Runs the job on ``ctx.placement``."""

    def stop(self) -> None:
        """Asks the job to stop; ``ctx.stop_event`` is set too."""

    def prepare(self, cluster: Cluster) -> None:
        """Called once at submission, before queuing (e.g. to warm the cluster up)."""

    def discard(self) -> None:
        """Called once when the job ends without ``run`` ever being called (stopped while
        pending, refused after ``prepare``, the service shut down first): gives back what
        ``prepare`` took (a served model's reserved route)."""

    def worker_pids(self) -> dict[int, int]:
        """The live worker processes by rank (for resource-use sampling); may be empty."""
        return {}

    # -- preemption (tandem.jobs.admission decides, the service asks the runner) -----------
    @property
    def preemptible(self) -> bool:
        """Whether ``preempt`` can make the job yield its resources and resume later."""
        return False

    def preempt(self, request: PreemptionRequest) -> bool:
        """Asks a running job to checkpoint and yield: the runner tells its workers, waits
        until they checkpoint or ``request.deadline`` (wall-clock time) passes, stops them,
        gives its placement back with ``JobContext.replace_placement`` (re-queued) and
        resumes when placed again. Called from the scheduler under the service lock: must
        not block. Returns False when the job cannot be preempted."""
        return False


@record
class JobSpec:
    """A job: ``bundles[i]`` is the resources of worker ``i``; all start together or none."""

    name: str
    bundles: tuple[Mapping[str, float], ...]
    runner: JobRunner
    strategy: str = "PACK"
    priority: int = 0
    min_bundles: int | None = None
    """An elastic gang: the job may start (and restart) with only the first ``k`` bundles,
    ``min_bundles <= k <= len(bundles)``; None: all of them or nothing."""
    owner: str | None = None
    """Who the job belongs to (quotas and fair share key on it); None: the service's
    default owner (``tandem.init(owner=...)``, else ``"default"``)."""
    tags: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)
    listener: JobListener | None = None
    """Called with every ``tandem.jobs.events.JobEvent`` of the job on the job's thread:
    ``StatusChanged``, ``Reported``, the run's ``Checkpointed``/``RankReported``, and the
    job's questions as ``Asked``, which it must answer (see ``JobCall``)."""
