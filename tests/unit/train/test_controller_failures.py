"""The train controller driven one step at a time on a scripted cluster (no processes):
each failure decision (RETRY, RESCHEDULE, RAISE) and the state after each step."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from tandem._core.errors import ConfigError
from tandem.cluster.base import Placement
from tandem.jobs.spec import JobContext, JobStatus
from tandem.train import FailureConfig, TrainingFailedError
from tandem.train._internal.controller import RunSpec, TrainController
from tandem.train._internal.state import TrainControllerState as S
from tandem.train._internal.storage import RunStorage
from tandem.train._internal.worker import ErrorInfo
from tandem.train.backends.base import Backend
from tandem.train.context import StorageContext


def placement(pid: str, nodes: list[str], ips: list[str]) -> Placement:
    return Placement(placement_id=pid, bundles=tuple({"CPU": 1.0} for _ in nodes),
                     node_ids=tuple(nodes), node_ips=tuple(ips), gpu_ids=tuple(() for _ in nodes))


class FakeWorker:
    def __init__(self, spec: Any, sink: Any) -> None:
        self.worker_id = spec.worker_id
        self.spec = spec
        self.sink = sink
        self.killed = False
        self.pid = None

    def frame(self, *frame: Any) -> None:
        self.sink(self, frame)

    def send(self, obj: Any) -> None:
        pass

    def kill(self) -> None:  # a killed worker's stream ends and its process exits
        if not self.killed:
            self.killed = True
            self.frame("__eof__")
            self.frame("__exit__", -9)


class ScriptedCluster:
    """Records every gang started; ``alive`` is what ``placement_alive`` answers."""

    supports_ray_objects = False

    def __init__(self) -> None:
        self.gangs: list[tuple[Placement, list[FakeWorker]]] = []
        self.alive = True

    def start_workers(self, placement, specs, tasks, sink):
        workers = [FakeWorker(s, sink) for s in specs]
        self.gangs.append((placement, workers))
        return workers

    def placement_alive(self, placement) -> bool:
        return self.alive

    def prewarm(self, preload=()) -> None:
        pass


@dataclass
class FakeJob:
    """The job object a ``JobContext`` reports to; records statuses and replacements."""

    next_placements: list[Placement] = field(default_factory=list)
    statuses: list[JobStatus] = field(default_factory=list)
    reasons: list[str | None] = field(default_factory=list)
    job_id: str = "job1"
    priority: int = 0
    log_paths: dict = field(default_factory=dict)

    @property
    def service(self) -> FakeJob:
        return self

    def _set_status(self, status: JobStatus, reason: str | None = None) -> None:
        self.statuses.append(status)
        self.reasons.append(reason)

    def _publish(self, rows: list) -> None:
        pass

    def _emit(self, event: Any) -> None:
        pass

    def _replace_placement(self) -> Placement | None:
        return self.next_placements.pop(0) if self.next_placements else None

    def stop(self, job_id: str) -> None:
        pass


def started(tmp_path, max_failures: int, first: Placement, *later: Placement):
    spec = RunSpec(fn_bytes=b"", pass_config=False, config={}, num_workers=len(first.bundles),
                   storage=StorageContext(str(tmp_path), "run"), backend=Backend(),
                   failure_config=FailureConfig(max_failures=max_failures), echo_prefix=None)
    c = TrainController(spec)
    cluster, job = ScriptedCluster(), FakeJob(next_placements=list(later))
    c.ctx = JobContext(job, cluster, first)  # type: ignore[arg-type]
    c.storage = RunStorage(spec.storage.run_path)
    c._seed_checkpoints()
    c._start_gang()
    c.state = S.RUNNING
    return c, cluster, job


def error(worker: FakeWorker, message: str = "boom") -> None:
    worker.frame("error", 0, ErrorInfo("ValueError", message, "Traceback: ...", None))


ONE_HOST = placement("p0", ["n1", "n2"], ["10.0.0.1", "10.0.0.1"])


def test_retry_restarts_the_gang_on_the_same_placement(tmp_path):
    c, cluster, job = started(tmp_path, 1, ONE_HOST)
    old = cluster.gangs[0][1]
    old[0].frame("done", 0, None)
    assert c.step(timeout_s=1) is S.RUNNING
    error(old[1])
    assert c.step(timeout_s=1) is S.WORKER_FAILED
    err, state = c._on_failure()
    assert (err, state) == (None, S.RUNNING)
    assert c.num_failures == 1 and all(w.killed for w in old)
    assert len(cluster.gangs) == 2 and cluster.gangs[1][0] is ONE_HOST
    assert job.statuses == [JobStatus.RESTARTING, JobStatus.RUNNING]
    # the recorded reasons name the failed rank, the error and the restart
    assert job.reasons[0].startswith("rank 1 failed (ValueError: boom); failure 1, ")
    assert job.reasons[1].startswith("all 2 workers restarted from ")
    old[0].frame("done", 0, None)  # a late frame of the replaced gang changes nothing
    new = cluster.gangs[1][1]
    new[0].frame("done", 0, None)
    assert c.step(timeout_s=1) is S.RUNNING
    new[1].frame("done", 1, None)
    assert c.step(timeout_s=1) is S.FINISHED
    c._kill_gang(wait_s=1)


def test_node_loss_reschedules_the_whole_gang(tmp_path):
    replacement = placement("p1", ["n1", "n3"], ["10.0.0.1", "10.0.0.1"])
    c, cluster, job = started(tmp_path, 1, ONE_HOST, replacement)
    cluster.alive = False
    cluster.gangs[0][1][1].kill()  # its node went away
    assert c.step(timeout_s=1) is S.WORKER_FAILED
    assert c._on_failure() == (None, S.RUNNING)
    assert c.ctx.placement is replacement and cluster.gangs[1][0] is replacement
    assert [w.spec.bundle_index for w in cluster.gangs[1][1]] == [0, 1]
    assert job.statuses == [JobStatus.RESTARTING, JobStatus.RUNNING]
    c._kill_gang(wait_s=1)


def test_node_loss_while_the_job_is_stopped_ends_stopped(tmp_path):
    c, cluster, _ = started(tmp_path, 1, ONE_HOST)  # no placement will come
    cluster.alive = False
    error(cluster.gangs[0][1][0])
    assert c.step(timeout_s=1) is S.WORKER_FAILED
    assert c._on_failure() == (None, S.STOPPED)
    assert len(cluster.gangs) == 1


def test_rescheduled_onto_two_hosts_with_local_storage_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv("TANDEM_STORAGE_IS_SHARED", raising=False)
    two_hosts = placement("p1", ["n1", "n3"], ["10.0.0.1", "10.0.0.9"])
    c, cluster, _ = started(tmp_path, 1, ONE_HOST, two_hosts)
    cluster.alive = False
    error(cluster.gangs[0][1][0])
    c.step(timeout_s=1)
    err, state = c._on_failure()
    assert state is S.ERRORED and isinstance(err, ConfigError)
    assert "2 machines" in str(err) and len(cluster.gangs) == 1


def test_spent_budget_raises_with_the_root_cause(tmp_path):
    c, cluster, job = started(tmp_path, 0, ONE_HOST)
    error(cluster.gangs[0][1][1], "bad batch")
    assert c.step(timeout_s=1) is S.WORKER_FAILED
    err, state = c._on_failure()
    assert state is S.ERRORED and isinstance(err, TrainingFailedError)
    assert err.rank == 1 and "ValueError: bad batch" in str(err)
    assert "FailureConfig(max_failures=0): no restarts allowed" in str(err)
    assert len(cluster.gangs) == 1 and job.statuses == []


def test_a_killed_peer_is_the_root_cause_over_collective_errors(tmp_path):
    c, cluster, _ = started(tmp_path, 0, ONE_HOST)
    rank0, rank1 = cluster.gangs[0][1]
    error(rank0, "gloo: connection reset by peer")
    rank1.kill()
    c.step(timeout_s=1)
    err, _ = c._on_failure()
    assert err.rank == 1 and "killed by SIGKILL" in str(err)


def test_run_refuses_a_gang_over_two_hosts_before_starting_it(tmp_path, monkeypatch):
    monkeypatch.delenv("TANDEM_STORAGE_IS_SHARED", raising=False)
    spec = RunSpec(fn_bytes=b"", pass_config=False, config={}, num_workers=2,
                   storage=StorageContext(str(tmp_path), "run"), backend=Backend(),
                   echo_prefix=None)
    cluster = ScriptedCluster()
    two_hosts = placement("p0", ["n1", "n2"], ["10.0.0.1", "10.0.0.2"])
    outcome = TrainController(spec).run(JobContext(FakeJob(), cluster, two_hosts))
    assert outcome.status is JobStatus.FAILED and isinstance(outcome.error, ConfigError)
    assert cluster.gangs == []  # no worker ever started
    assert "shared storage" in (tmp_path / "run" / "error.txt").read_text()


@pytest.mark.parametrize("stop_first", [True, False])
def test_stop_during_a_failure_ends_stopped(tmp_path, stop_first):
    c, cluster, _ = started(tmp_path, 3, ONE_HOST)
    if stop_first:
        c.stop()
        assert c.step(timeout_s=1) is S.STOPPED
    else:
        error(cluster.gangs[0][1][0])
        assert c.step(timeout_s=1) is S.WORKER_FAILED
        c.stop()
        assert c._on_failure() == (None, S.STOPPED)
        assert len(cluster.gangs) == 1
    c._kill_gang(wait_s=1)


def test_worker_and_controller_failures_raise_rays_error_classes(tmp_path):
    """A worker's failure ends the run with Ray's WorkerGroupError (worker_failures by
    rank), a failure of the controller itself with ControllerError; both are
    TrainingFailedError and keep their fields through pickling (the server sends them)."""
    import pickle

    from tandem.train import ControllerError, WorkerGroupError

    c, cluster, _ = started(tmp_path, 0, ONE_HOST)
    error(cluster.gangs[0][1][1], "bad batch")
    c.step(timeout_s=1)
    err, _ = c._on_failure()
    assert isinstance(err, WorkerGroupError) and isinstance(err, TrainingFailedError)
    assert list(err.worker_failures) == [1]
    assert str(err).startswith("Training failed due to worker errors:\nrank 1 raised ValueError")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is WorkerGroupError and back.rank == 1 and str(back) == str(err)
    assert "bad batch" in str(back.worker_failures[1])

    cause = KeyError("lost placement")
    ce = ControllerError(cause)
    assert isinstance(ce, TrainingFailedError) and ce.controller_failure is cause
    assert str(ce) == "Training failed due to controller error:\n'lost placement'"
    assert str(pickle.loads(pickle.dumps(ce))) == str(ce)
