"""The job service: a queue, the gang scheduler, and one thread per running job.

Embedded by default (``LocalJobService`` in the calling process over a ``LocalCluster``);
the train server runs the same class in a long-lived process.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping

from tandem._core.clock import Clock, RealClock
from tandem._core.errors import ConfigError, JobNotFoundError, ServiceShutdownError
from tandem._core.ids import new_id
from tandem.cluster.base import STRATEGIES, Cluster, Placement
from tandem.jobs.admission import (
    DEFAULT_OWNER,
    AdmissionPolicy,
    ClusterCapacity,
    Preempt,
    Quota,
    RunningSet,
    Start,
    Wait,
    demand,
)
from tandem.jobs.events import (
    Checkpointed,
    JobEvent,
    JobSubscriber,
    RankReported,
    Reported,
    StatusChanged,
)
from tandem.jobs.scheduler import GangScheduler
from tandem.jobs.spec import (
    JobCall,
    JobContext,
    JobOutcome,
    JobSpec,
    JobStatus,
    PreemptionRequest,
)
from tandem.jobs.view import DEFAULT_REPORT_WINDOW, JobState, check_report_window, iter_reports

__all__ = ["Job", "LocalJobService", "iter_reports"]

logger = logging.getLogger(__name__)

class Job(JobState):
    """The service's record of one job (and its ``JobView``). Scheduling fields are written
    under the service lock; status, reports and outcome under ``cond`` (see ``JobState``)."""

    def __init__(
        self,
        service: LocalJobService,
        spec: JobSpec,
        seq: int,
        now: float,
        job_id: str | None = None,
    ) -> None:
        super().__init__(job_id or new_id("job_"), spec.name, report_window=service.report_window)
        self._service = service
        self.spec = spec
        self.priority = spec.priority
        self.owner: str = spec.owner or service.default_owner
        self.seq = seq
        self.bundles = spec.bundles
        self.demand = demand(spec.bundles)
        self.min_bundles = spec.min_bundles
        self.strategy = spec.strategy
        self.submitted_at = now
        self.submitted_time = time.time()
        self.started_time: float | None = None
        self.ended_time: float | None = None
        self.transitions: list[tuple[str, float]] = [(JobStatus.PENDING.value, self.submitted_time)]
        self.reasons: list[tuple[str, str | None]] = [(JobStatus.PENDING.value, None)]
        """Each transition's status and why (the same order as ``transitions``)."""
        # Why the job last changed status (read by subscribers with the "status" event).
        self.status_reason: str | None = None
        self.placement: Placement | None = None
        self.ctx: JobContext | None = None
        self.thread: JobThread | None = None
        # What admission policies read (tandem.jobs.admission.RunningJob), clock times:
        self.started_at = now
        self.last_checkpoint_at: float | None = None
        self.preempting = False
        self.wait_reason: str | None = None
        """Why the job waits in the queue now (the policy's words), None when it does not."""
        self.num_preemptions = 0
        self.preempt_reason: str | None = None

    @property
    def holds(self) -> dict[str, float]:
        """The resources its placement holds now (summed; empty without one)."""
        p = self.placement
        return demand(p.bundles) if p is not None else {}

    @property
    def preemptible(self) -> bool:
        return self.spec.runner.preemptible

    def stop(self) -> None:
        self._service.stop(self.job_id)

    # -- what its JobContext reaches (tandem.jobs.spec.JobHost) ----------------------------
    @property
    def service(self) -> LocalJobService:
        return self._service

    def _route_call(self, kind: str, call: JobCall) -> bool:
        router = self._service.call_router
        return router is not None and router(self, kind, call)

    def _replace_placement(self) -> Placement | None:
        return self._service._replace_placement(self)

    def _spare_bundles(self, bundle: Mapping[str, float], most: int) -> int:
        return self._service._spare_bundles(bundle, most)

    def _resize(self, num_bundles: int) -> Placement | None:
        return self._service._resize(self, num_bundles)

    def _release_early(self) -> None:
        self._service._release_early(self)

    def _set_status(self, status: JobStatus, reason: str | None = None) -> None:
        """A non-terminal status change (the service ends jobs with ``_finish``)."""
        if not self._change_status(status):
            return
        self.status_reason = reason
        self.transitions.append((status.value, time.time()))
        self.reasons.append((status.value, reason))
        self._emit(StatusChanged(status))

    def _emit(self, event: StatusChanged | Reported | Checkpointed | RankReported) -> None:
        if isinstance(event, Checkpointed):
            self.last_checkpoint_at = self._service.clock.now()
        if self.spec.listener is not None:
            self.spec.listener(event)
        self._service._notify(self, event)

    def _publish(self, reports: list[dict]) -> None:
        self._add_reports(reports)
        self._emit(Reported(reports))


class JobThread:
    """A running job's hold on one of the service's job threads: ``join`` waits for the
    job (not the thread, which goes back to the pool and runs the next job)."""

    __slots__ = ("_done", "name")

    def __init__(self, name: str) -> None:
        self.name = name
        self._done = threading.Event()

    def join(self, timeout: float | None = None) -> None:
        self._done.wait(timeout)

    def is_alive(self) -> bool:
        return not self._done.is_set()


class _JobThreads:
    """The threads jobs run on: a job takes an idle one, else a new one is started; a thread
    whose job ended waits ``idle_s`` for the next before it exits. A sweep of short trials
    then starts no thread per trial (a thread start costs about a millisecond on a busy
    2-core machine, its GIL hand-over included)."""

    def __init__(self, idle_s: float = 10.0) -> None:
        self.idle_s = idle_s
        self._local = threading.local()  # a pool thread's "ending" flag and kept job
        self._closed = False
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], JobThread] | None]] = []

    @contextlib.contextmanager
    def ending(self) -> Iterator[None]:
        """Around the last, short steps of a job on one of these threads: the first job
        started meanwhile is kept for this thread, which runs it as soon as they are done."""
        self._local.ending = True
        try:
            yield
        finally:
            self._local.ending = False

    def run(self, fn: Callable[[], None], handle: JobThread) -> None:
        """Runs ``fn`` on an idle thread or a new one; ``handle`` is set when it returns."""
        local = self._local
        if getattr(local, "ending", False) and getattr(local, "next", None) is None:
            local.next = (fn, handle)
            return
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is not None:
            inbox.put((fn, handle))
            return
        inbox = queue.SimpleQueue()
        inbox.put((fn, handle))
        threading.Thread(target=self._loop, args=(inbox,), name="tandem-job", daemon=True).start()

    def close(self) -> None:
        """Lets the idle threads go (a thread running a job goes once the job ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._closed = True
        for inbox in idle:
            inbox.put(None)

    def _loop(self, inbox: queue.SimpleQueue[tuple[Callable[[], None], JobThread] | None]) -> None:
        while True:
            try:
                item = inbox.get(timeout=self.idle_s)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                item = inbox.get()  # handed a job just as it timed out
            if item is None:
                return
            fn, handle = item
            while True:
                try:
                    fn()  # LocalJobService._run_job: catches what the job raises
                except BaseException:  # noqa: BLE001 - the kept job below must still run
                    logger.exception("a job thread's work failed")
                finally:
                    handle._done.set()
                kept, self._local.next = getattr(self._local, "next", None), None
                if kept is None:
                    break
                fn, handle = kept  # started by the job that just ended (``ending``)
            with self._lock:
                if self._closed:
                    return
                self._idle.append(inbox)


class LocalJobService:
    """Queues jobs, starts each when its whole gang fits, frees resources when it ends.

    Thread-safe. ``submit`` refuses at once a job that could never fit on the cluster.
    Implements ``tandem.jobs.contract.JobService``.

    Args:
        cluster: where jobs run (``LocalCluster``, ``RayCluster``).
        scheduler: the ``AdmissionPolicy`` (tandem.jobs.admission); default
            ``GangScheduler`` (FIFO gang scheduling with backfill, no quotas, no preemption).
        report_window: how many reports each job keeps in memory (see ``JobState``).
        default_owner: the owner of jobs whose spec names none.
        preemption_notice_s: how long a preempted job has to checkpoint before it is
            stopped (its ``FailureConfig(preemption_grace_s=...)`` is added to it).
    """

    def __init__(
        self,
        cluster: Cluster,
        clock: Clock | None = None,
        scheduler: AdmissionPolicy | None = None,
        report_window: int = DEFAULT_REPORT_WINDOW,
        default_owner: str = DEFAULT_OWNER,
        preemption_notice_s: float = 30.0,
    ) -> None:
        self.cluster = cluster
        self.report_window = check_report_window(report_window)
        self.clock = clock or RealClock()
        if scheduler is not None and not isinstance(scheduler, AdmissionPolicy):
            raise ConfigError(f"scheduler={scheduler!r} is not an AdmissionPolicy; use "
                              f"tandem.jobs.admission.FifoGangPolicy, FairSharePolicy or "
                              f"PriorityPreemptionPolicy.")
        self.scheduler: AdmissionPolicy = scheduler or GangScheduler(self.clock)
        self.default_owner = default_owner
        self.preemption_notice_s = preemption_notice_s
        self._lock = threading.RLock()
        self._jobs: dict[str, Job] = {}
        self._pending: list[Job] = []
        self._seq = itertools.count()
        self._closed = False
        self._subscribers: list[JobSubscriber[Job]] = []
        self.call_router: Callable[[Job, str, JobCall], bool] | None = None
        """Where a job without a listener sends its questions (``JobContext.ask``): the
        train server routes them to the client following the job; returns False when it
        cannot (the job then gets the call's default answer)."""
        self._wakeup = threading.Event()
        self._threads = _JobThreads()
        self._starts_held: str | None = None
        if getattr(cluster, "needs_polling", False):
            # The cluster's capacity changes on its own (nodes join): retry pending jobs.
            threading.Thread(target=self._poll, name="tandem-scheduler-poll", daemon=True).start()

    # -- public ------------------------------------------------------------------------
    def submit(self, spec: JobSpec, job_id: str | None = None) -> Job:
        """Queues a job; ``job_id`` keeps a known id (the train server re-queuing a job)."""
        if spec.strategy not in STRATEGIES:
            raise ConfigError(
                f"placement_strategy={spec.strategy!r} is not known; use one of {STRATEGIES}."
            )
        if not spec.bundles:
            raise ConfigError("A job needs at least one worker (got an empty gang).")
        # An elastic gang must fit at its least: it starts with what fits and grows as
        # the cluster does (Ray's elastic training asks no more of the cluster).
        self.cluster.check_feasible(spec.bundles[:spec.min_bundles or len(spec.bundles)],
                                    spec.strategy)
        spec.runner.prepare(self.cluster)
        with self._lock:
            try:
                if self._closed:
                    raise ServiceShutdownError("The job service has been shut down.")
                if job_id is not None and job_id in self._jobs:
                    raise ConfigError(
                        f"A job with id {job_id!r} is already known to this service.")
                job = Job(self, spec, next(self._seq), self.clock.now(), job_id)
                self.scheduler.check_submit(job, [j for j in self._pending if j.thread is None])
            except BaseException:
                spec.runner.discard()  # refused: it never runs
                raise
            self._jobs[job.job_id] = job
            self._pending.append(job)
            self._notify(job, StatusChanged(JobStatus.PENDING))
            self._schedule()
        return job

    def set_quota(self, owner: str | None, quota: Quota | dict[str, float] | None) -> None:
        """Sets ``owner``'s quota (``owner=None``: everyone's default; ``quota=None``
        removes it). Needs a policy with quotas (``FairSharePolicy`` /
        ``PriorityPreemptionPolicy``)."""
        setter = getattr(self.scheduler, "set_quota", None)
        if setter is None:
            raise ConfigError(
                f"The scheduling policy {self.scheduler.name!r} has no quotas; start the "
                f"service with scheduling='fair' or 'priority' "
                f"(tandem.init(scheduling=...), `tandem server start --scheduling ...`).")
        if isinstance(quota, dict):
            quota = Quota.from_dict(quota)
        with self._lock:
            setter(owner, quota)
        self._schedule()

    def set_group_quota(self, group: str, quota: Quota | dict[str, float] | None) -> None:
        """Sets group ``group``'s quota (what its members hold and queue together;
        ``quota=None`` removes it). Needs a policy with quotas, as ``set_quota``."""
        setter = self._quota_setter("set_group_quota")
        if isinstance(quota, dict):
            quota = Quota.from_dict(quota)
        with self._lock:
            setter(group, quota)
        self._schedule()

    def set_group(self, owner: str, group: str | None) -> None:
        """Puts ``owner`` in ``group`` (None: in none), for group quotas and fair share."""
        setter = self._quota_setter("set_group")
        with self._lock:
            setter(owner, group)
        self._schedule()

    def _quota_setter(self, name: str) -> Callable[..., None]:
        setter = getattr(self.scheduler, name, None)
        if setter is None:
            raise ConfigError(
                f"The scheduling policy {self.scheduler.name!r} has no quotas; start the "
                f"service with scheduling='fair' or 'priority' "
                f"(tandem.init(scheduling=...), `tandem server start --scheduling ...`).")
        return setter

    def poke(self) -> None:
        """Tries to start pending jobs now (e.g. after the cluster gained capacity)."""
        self._schedule()

    def hold_starts(self, reason: str | None) -> None:
        """Starts no job (nor a restart of one) while ``reason`` is set — the train server
        cannot prove it still owns its job store; ``None`` lets them start again."""
        with self._lock:
            self._starts_held = reason
        if reason is None:
            self._schedule()

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise JobNotFoundError(
                f"No job with id {job_id!r} is known to this job service. "
                f"List jobs with tandem.jobs.list() or `tandem jobs list`."
            )
        return job

    def list(self) -> list[Job]:
        with self._lock:
            return list(self._jobs.values())

    def stop(self, job_id: str) -> None:
        job = self.get(job_id)
        with self._lock:
            discard = job in self._pending and job.thread is None
            if discard:
                self._pending.remove(job)
                self._finish(job, JobOutcome(JobStatus.STOPPED))
            ctx = job.ctx
        if discard:
            job.spec.runner.discard()  # stopped while pending: it never runs
            return
        if ctx is not None and not job.status.is_terminal:
            ctx.stop_event.set()
            job.spec.runner.stop()

    def forget(self, job_id: str) -> None:
        """Drops a finished job's record (memory stays flat over many short jobs)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is not None and job.status.is_terminal:
                del self._jobs[job_id]

    def subscribe(self, callback: JobSubscriber[Job]) -> None:
        """``callback(job, event)`` for every event of every job but questions (see
        ``tandem.jobs.events.JobSubscriber``)."""
        self._subscribers.append(callback)

    def shutdown(self, timeout_s: float = 10.0) -> None:
        """Stops every job (pending ones first) and waits for their threads."""
        with self._lock:
            self._closed = True
            pending = [j for j in self._pending if j.thread is None]
            self._pending = []
            running = [j for j in self._jobs.values() if j.thread is not None]
        self._wakeup.set()
        for job in pending:
            self._finish(job, JobOutcome(JobStatus.STOPPED))
            job.spec.runner.discard()
        for job in running:
            if job.ctx is not None:
                job.ctx.stop_event.set()
                job.spec.runner.stop()
        deadline = time.monotonic() + timeout_s
        for job in running:
            assert job.thread is not None
            job.thread.join(max(0.0, deadline - time.monotonic()))
        self._threads.close()

    # -- internals ---------------------------------------------------------------------
    def _notify(self, job: Job, event: JobEvent) -> None:
        for cb in self._subscribers:
            try:
                cb(job, event)
            except Exception:
                logger.exception("job event subscriber failed")

    def _schedule(self) -> None:
        with self._lock:
            if self._closed or self._starts_held is not None or not self._pending:
                return
            queue = GangScheduler.order(self._pending)
            running = RunningSet(j for j in self._jobs.values()
                                 if j.placement is not None and j not in self._pending)
            decisions = self.scheduler.make_decision(
                queue, running, ClusterCapacity(self.cluster), self.clock.now())
            for decision in decisions:
                if isinstance(decision, Start):
                    self._start(decision.job, decision.placement)
                elif isinstance(decision, Wait):
                    job = decision.job
                    job.wait_reason = decision.reason
                    if job.thread is None:  # a queued job's state reason is why it waits
                        job.status_reason = decision.reason
                elif isinstance(decision, Preempt):
                    self._preempt(decision.job, decision)

    def _start(self, job: Job, placement: Placement) -> None:
        self._pending.remove(job)
        job.wait_reason = None
        job.preempting = False
        job.started_at = self.clock.now()
        if job.thread is not None:  # a running job waiting for a new placement
            with job.cond:
                job.placement = placement
                job.cond.notify_all()
            return
        job.placement = placement
        job.ctx = JobContext(job, self.cluster, placement)
        job.started_time = time.time()
        job.thread = handle = JobThread(f"tandem-job-{job.name}")
        job._set_status(JobStatus.RUNNING,
                        f"placed on the cluster ({len(job.bundles)} bundle(s))")
        self._threads.run(lambda: self._run_job(job), handle)

    def _preempt(self, job: Job, decision: Preempt) -> None:
        """Asks ``job`` to checkpoint and yield (it re-queues itself through
        ``replace_placement`` once its workers are stopped)."""
        if job.preempting or job.status.is_terminal:
            return
        request = PreemptionRequest(decision.reason, time.time() + self.preemption_notice_s,
                                    decision.for_job.job_id)
        if not job.spec.runner.preempt(request):
            return
        job.preempting = True
        job.num_preemptions += 1
        job.preempt_reason = decision.reason
        logger.info("job %s: %s; asked to checkpoint within %.0f s", job.job_id,
                    decision.reason, self.preemption_notice_s)

    def _run_job(self, job: Job) -> None:
        assert job.ctx is not None
        try:
            outcome = job.spec.runner.run(job.ctx)
        except BaseException as e:  # noqa: BLE001 - a runner bug must not leak resources
            logger.error("job %s failed inside the service:\n%s", job.job_id, traceback.format_exc())
            outcome = JobOutcome(JobStatus.FAILED, error=e)
        # the job is over: a job started from here runs next on this very thread (no
        # wake-up of another), once the few steps below are done
        with self._threads.ending():
            self._release_early(job)
            self._finish(job, outcome)
            self._schedule()

    def _release_early(self, job: Job) -> None:
        with self._lock:
            placement, job.placement = job.placement, None
        if placement is not None:
            self.cluster.release(placement)
            self._schedule()

    def _replace_placement(self, job: Job) -> Placement | None:
        """Releases a running job's placement, queues it, and waits for a new one."""
        self._release_early(job)
        with self._lock:
            if self._closed:
                return None
            self._pending.append(job)
            self._schedule()
        assert job.ctx is not None
        with job.cond:
            while job.placement is None and not job.ctx.stop_event.is_set() and not self._closed:
                job.cond.wait(0.5)
        with self._lock:
            if job in self._pending:
                self._pending.remove(job)
            if job.placement is None or job.ctx.stop_event.is_set():
                return None
            return job.placement

    def _spare_bundles(self, bundle: Mapping[str, float], most: int) -> int:
        """How many more ``bundle``s fit now, while nobody waits in the queue."""
        with self._lock:
            if self._closed or self._pending:
                return 0
            free = self.cluster.available()
            n = most
            for k, v in bundle.items():
                if v > 0:
                    n = min(n, int(free.get(k, 0.0) / v + 1e-9))
            return max(0, n)

    def _resize(self, job: Job, num_bundles: int) -> Placement | None:
        """Gives the job's placement back and places ``num_bundles`` of its bundles instead
        (the old size when those do not fit); queues it when neither fits now."""
        with self._lock:
            old, job.placement = job.placement, None
            if old is not None:
                self.cluster.release(old)
            sizes = [num_bundles] + ([len(old.bundles)] if old is not None else [])
            for k in sizes:
                placement = self.cluster.place(job.bundles[:k], job.strategy)
                if placement is not None:
                    job.placement = placement
                    return placement
        self._schedule()
        return self._replace_placement(job)

    def _poll(self) -> None:
        interval = float(getattr(self.cluster, "poll_interval_s", 1.0))
        while not self._wakeup.wait(interval):
            if self._closed:
                return
            if self._pending:
                try:
                    self._schedule()
                except Exception:
                    logger.exception("retrying pending jobs failed")

    def _finish(self, job: Job, outcome: JobOutcome) -> None:
        job.ended_time = time.time()
        if job._end(outcome):
            job.transitions.append((outcome.status.value, job.ended_time))
            job.reasons.append((outcome.status.value, None))
            job._emit(StatusChanged(outcome.status))
