"""Conformance suite for the job contract (``tandem.jobs.contract``).

Every ``JobService`` / ``JobView`` pair must behave the same to whoever follows a job:
``results()`` streams reports while the job runs, again after it ended, and after the
report window dropped old ones; ``wait`` / ``stop`` / ``logs`` / ``status`` / ``get`` /
``list`` agree. The checks are plain functions, ``check_*(service, jobs, workdir)``, so
they can also run where pytest cannot reach (inside a worker, against the nested service).
``JobServiceTestCase`` runs them all under pytest; a subclass provides three fixtures::

    from tandem.jobs.testing.service_conformance import JobServiceTestCase

    class TestMyService(JobServiceTestCase):
        @pytest.fixture
        def service(self):      # a JobService whose report window is REPORT_WINDOW
            ...
        @pytest.fixture
        def jobs(self):         # a ConformanceJobs: builds the jobs the checks submit
            return ScriptedJobs()

The jobs come from a ``ConformanceJobs`` so that each service runs the kind of job it is
for: ``ScriptedJobs`` (a runner without processes, for a service in this process) or
real train jobs (the train layer's tests build them; a train server or Ray run those).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from tandem._core.errors import JobNotFoundError
from tandem.jobs.contract import JobService, JobView
from tandem.jobs.handle import JobHandle
from tandem.jobs.spec import JobContext, JobOutcome, JobRunner, JobSpec, JobStatus

__all__ = [
    "CHECKS",
    "REPORT_WINDOW",
    "ConformanceJobs",
    "JobServiceTestCase",
    "ScriptedJobs",
    "ScriptedRunner",
    "open_gate",
    "run_all_checks",
]

#: The report window a service under test keeps (small, so the checks can overflow it).
REPORT_WINDOW = 8
#: How long any single wait in a check may take.
TIMEOUT_S = 90.0


class ConformanceJobs(Protocol):
    """Builds the three jobs the checks need. A job writes ``hello from rank 0`` (and its
    other ranks likewise) to its output; every report is a dict with ``"i"``: 0, 1, 2..."""

    def reporting(self, name: str, before_gate: int, after_gate: int, gate_path: str) -> JobSpec:
        """Reports ``before_gate`` times, waits until the file ``gate_path`` exists, reports
        ``after_gate`` more times, then finishes."""
        ...

    def failing(self, name: str) -> JobSpec:
        """Reports once (``{"i": 0}``), then fails with ``ValueError("conformance failure")``."""
        ...

    def endless(self, name: str) -> JobSpec:
        """Reports once, then runs until it is stopped."""
        ...


def open_gate(path: str) -> None:
    with open(path, "w") as f:
        f.write("open")


def _wait_for(predicate: Callable[[], bool], what: str, timeout_s: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.02)


# -- the checks ---------------------------------------------------------------------------------

def check_meets_the_protocols(service: JobService, jobs: ConformanceJobs, workdir: str) -> None:
    assert isinstance(service, JobService), f"{type(service).__name__} is not a JobService"
    gate = os.path.join(workdir, "gate-protocols")
    view = service.submit(jobs.reporting("protocols", 1, 0, gate))
    assert isinstance(view, JobView), f"{type(view).__name__} is not a JobView"
    open_gate(gate)
    JobHandle(view).wait(TIMEOUT_S)


def check_results_stream_while_running(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    gate = os.path.join(workdir, "gate-stream")
    handle = JobHandle(service.submit(jobs.reporting("streaming", 3, 2, gate)))
    it = handle.results()
    first = [next(it)["i"] for _ in range(3)]
    assert first == [0, 1, 2], first
    # the job is waiting at its gate: those reports came while it ran
    assert handle.status() in ("RUNNING", "RESTARTING"), handle.status()
    assert not handle.done()
    open_gate(gate)
    rest = [r["i"] for r in it]
    assert rest == [3, 4], rest
    handle.wait(TIMEOUT_S)
    assert handle.status() == "FINISHED" and handle.done()


def check_results_after_the_end(service: JobService, jobs: ConformanceJobs, workdir: str) -> None:
    gate = os.path.join(workdir, "gate-after")
    open_gate(gate)
    view = service.submit(jobs.reporting("after-end", 4, 0, gate))
    handle = JobHandle(view)
    handle.wait(TIMEOUT_S)
    assert [r["i"] for r in handle.results()] == [0, 1, 2, 3]
    assert [r["i"] for r in handle.results()] == [0, 1, 2, 3]  # again, from the start
    again = JobHandle(service.get(view.job_id))  # a fresh view of the same job
    assert again.job_id == view.job_id and again.name == handle.name
    assert [r["i"] for r in again.results()] == [0, 1, 2, 3]
    assert again.status() == "FINISHED"


def check_results_after_the_window_dropped_reports(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    n = REPORT_WINDOW * 3
    gate = os.path.join(workdir, "gate-window")
    view = service.submit(jobs.reporting("window", n, 0, gate))
    handle = JobHandle(view)
    open_gate(gate)
    handle.wait(TIMEOUT_S)
    seen = [r["i"] for r in handle.results()]
    assert seen and seen[-1] == n - 1, seen
    assert seen == list(range(seen[0], n)), f"reports skipped or repeated: {seen}"
    window = view.read_reports(0, 0.0)
    assert window.ended
    assert 0 < len(window.rows) <= REPORT_WINDOW, len(window.rows)
    assert window.first == n - len(window.rows) > 0, (window.first, len(window.rows))
    assert [r["i"] for r in window.rows] == list(range(window.first, n))


def check_wait_times_out_then_stop_ends_the_job(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    handle = JobHandle(service.submit(jobs.endless("endless")))
    it = handle.results()
    assert next(it)["i"] == 0  # it runs
    try:
        handle.wait(timeout=0.2)
    except TimeoutError as e:
        assert handle.job_id in str(e) and "keeps running" in str(e)
    else:
        raise AssertionError("wait(timeout=0.2) returned for a job that runs until stopped")
    assert handle.status() in ("RUNNING", "RESTARTING")
    handle.stop()
    handle.wait(TIMEOUT_S)  # a stopped job is not an error
    assert handle.status() == "STOPPED" and handle.done()
    assert list(it) == []  # the stream ends with the job
    handle.stop()  # stopping a job that is over does nothing


def check_a_failure_is_raised_by_wait(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    handle = JobHandle(service.submit(jobs.failing("failing")))
    assert [r["i"] for r in handle.results()] == [0]
    try:
        handle.wait(TIMEOUT_S)
    except TimeoutError:
        raise
    except Exception as e:  # noqa: BLE001 - the job's own error type (TrainingFailedError...)
        assert "conformance failure" in str(e), repr(e)
    else:
        raise AssertionError("wait() returned for a job that failed")
    assert handle.status() == "FAILED"


def check_logs_are_prefixed_by_rank(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    gate = os.path.join(workdir, "gate-logs")
    open_gate(gate)
    handle = JobHandle(service.submit(jobs.reporting("logs", 1, 0, gate)))
    handle.wait(TIMEOUT_S)
    _wait_for(lambda: "(rank=0) hello from rank 0" in handle.logs(), "the job's output")


def check_get_and_list_know_the_job(
    service: JobService, jobs: ConformanceJobs, workdir: str
) -> None:
    gate = os.path.join(workdir, "gate-list")
    view = service.submit(jobs.reporting("listed", 1, 0, gate))
    assert view.job_id
    assert service.get(view.job_id).job_id == view.job_id
    assert view.job_id in [j.job_id for j in service.list()]
    open_gate(gate)
    JobHandle(view).wait(TIMEOUT_S)
    assert service.get(view.job_id).status is JobStatus.FINISHED
    try:
        service.get("job_does_not_exist")
    except JobNotFoundError as e:
        assert "job_does_not_exist" in str(e)
    else:
        raise AssertionError("get() of an unknown id did not raise JobNotFoundError")


CHECKS: tuple[Callable[[JobService, ConformanceJobs, str], None], ...] = (
    check_meets_the_protocols,
    check_results_stream_while_running,
    check_results_after_the_end,
    check_results_after_the_window_dropped_reports,
    check_wait_times_out_then_stop_ends_the_job,
    check_a_failure_is_raised_by_wait,
    check_logs_are_prefixed_by_rank,
    check_get_and_list_know_the_job,
)


def run_all_checks(service: JobService, jobs: ConformanceJobs, workdir: str) -> list[str]:
    """Runs every check in turn (raising at the first that fails); returns their names."""
    done = []
    for check in CHECKS:
        sub = os.path.join(workdir, check.__name__)
        os.makedirs(sub, exist_ok=True)
        check(service, jobs, sub)
        done.append(check.__name__)
    return done


# -- scripted jobs (no processes) -------------------------------------------------------------

class ScriptedRunner(JobRunner):
    """Publishes reports from the job's thread; writes one output line to a log file."""

    def __init__(self, mode: str, before_gate: int = 1, after_gate: int = 0,
                 gate_path: str | None = None, log_dir: str | None = None) -> None:
        self.mode = mode
        self.before_gate = before_gate
        self.after_gate = after_gate
        self.gate_path = gate_path
        self.log_dir = log_dir

    def run(self, ctx: JobContext) -> JobOutcome:
        if self.log_dir is not None:
            path = os.path.join(self.log_dir, f"{ctx.job_id}-rank0.log")
            with open(path, "w") as f:
                f.write("hello from rank 0\n")
            ctx.set_log_paths({0: path})
        i = 0
        for _ in range(self.before_gate):
            ctx.publish([{"i": i}])
            i += 1
        if self.mode == "failing":
            return JobOutcome(JobStatus.FAILED, error=ValueError("conformance failure"))
        while not ctx.stop_event.is_set():
            if self.mode == "reporting" and (self.gate_path is None or
                                             os.path.exists(self.gate_path)):
                break
            ctx.stop_event.wait(0.01)
        if ctx.stop_event.is_set():
            return JobOutcome(JobStatus.STOPPED)
        for _ in range(self.after_gate):
            ctx.publish([{"i": i}])
            i += 1
        return JobOutcome(JobStatus.FINISHED, value=i)


class ScriptedJobs:
    """``ConformanceJobs`` with ``ScriptedRunner``s: one bundle of 1 CPU each."""

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir

    def _spec(self, name: str, runner: ScriptedRunner) -> JobSpec:
        return JobSpec(name=name, bundles=({"CPU": 1},), runner=runner)

    def reporting(self, name: str, before_gate: int, after_gate: int, gate_path: str) -> JobSpec:
        return self._spec(name, ScriptedRunner("reporting", before_gate, after_gate, gate_path,
                                               self.log_dir))

    def failing(self, name: str) -> JobSpec:
        return self._spec(name, ScriptedRunner("failing", log_dir=self.log_dir))

    def endless(self, name: str) -> JobSpec:
        return self._spec(name, ScriptedRunner("endless", log_dir=self.log_dir))


# -- pytest -----------------------------------------------------------------------------------

class JobServiceTestCase:
    """Runs every check against the ``service`` fixture with the ``jobs`` fixture's jobs.

    A subclass defines ``service`` (a ``JobService`` with a report window of
    ``REPORT_WINDOW``) and ``jobs`` (a ``ConformanceJobs``); both fixtures may be
    parametrized over implementations.
    """

    @staticmethod
    def _run(check: Callable[[JobService, ConformanceJobs, str], None], service: JobService,
             jobs: ConformanceJobs, tmp_path: Path) -> None:
        check(service, jobs, str(tmp_path))

    def test_meets_the_protocols(self, service: JobService, jobs: ConformanceJobs,
                                 tmp_path: Path) -> None:
        self._run(check_meets_the_protocols, service, jobs, tmp_path)

    def test_results_stream_while_running(self, service: JobService, jobs: ConformanceJobs,
                                          tmp_path: Path) -> None:
        self._run(check_results_stream_while_running, service, jobs, tmp_path)

    def test_results_after_the_end(self, service: JobService, jobs: ConformanceJobs,
                                   tmp_path: Path) -> None:
        self._run(check_results_after_the_end, service, jobs, tmp_path)

    def test_results_after_the_window_dropped_reports(
        self, service: JobService, jobs: ConformanceJobs, tmp_path: Path
    ) -> None:
        self._run(check_results_after_the_window_dropped_reports, service, jobs, tmp_path)

    def test_wait_times_out_then_stop_ends_the_job(
        self, service: JobService, jobs: ConformanceJobs, tmp_path: Path
    ) -> None:
        self._run(check_wait_times_out_then_stop_ends_the_job, service, jobs, tmp_path)

    def test_a_failure_is_raised_by_wait(self, service: JobService, jobs: ConformanceJobs,
                                         tmp_path: Path) -> None:
        self._run(check_a_failure_is_raised_by_wait, service, jobs, tmp_path)

    def test_logs_are_prefixed_by_rank(self, service: JobService, jobs: ConformanceJobs,
                                       tmp_path: Path) -> None:
        self._run(check_logs_are_prefixed_by_rank, service, jobs, tmp_path)

    def test_get_and_list_know_the_job(self, service: JobService, jobs: ConformanceJobs,
                                       tmp_path: Path) -> None:
        self._run(check_get_and_list_know_the_job, service, jobs, tmp_path)
