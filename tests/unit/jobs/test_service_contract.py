"""The job contract's conformance suite on the embedded service, with scripted jobs (no
processes); the same suite runs on real train jobs against the local, nested, remote and
Ray services in tests/integration/test_job_contract.py and tests/integration/ray/."""

from __future__ import annotations

import pytest

from tandem.cluster.local import LocalCluster
from tandem.jobs.contract import JobService, JobView
from tandem.jobs.service import LocalJobService
from tandem.jobs.testing.service_conformance import (
    REPORT_WINDOW,
    JobServiceTestCase,
    ScriptedJobs,
)
from tandem.jobs.view import JobState, iter_reports

pytestmark = pytest.mark.timeout(60)


class TestLocalJobServiceContract(JobServiceTestCase):
    @pytest.fixture
    def service(self):
        svc = LocalJobService(LocalCluster(num_cpus=2), report_window=REPORT_WINDOW)
        yield svc
        svc.shutdown()

    @pytest.fixture
    def jobs(self, tmp_path):
        return ScriptedJobs(str(tmp_path))


class _HalfView:
    """A job view that forgot the report window (the bug that broke two user programs)."""

    job_id = "j"
    name = "n"


def test_a_class_missing_part_of_the_contract_is_not_a_job_view():
    assert not isinstance(_HalfView(), JobView)
    assert not isinstance(object(), JobService)


def test_iter_reports_skips_what_the_window_dropped_and_never_repeats():
    class Fed(JobState):
        def stop(self) -> None:
            pass

    job = Fed("j", "n", report_window=4)
    job._add_reports([{"i": 0}, {"i": 1}])
    it = iter_reports(job, poll_s=0.01)
    assert [next(it)["i"], next(it)["i"]] == [0, 1]
    job._add_reports([{"i": i} for i in range(2, 9)])  # overflows: keeps the newest 2
    from tandem.jobs.spec import JobOutcome, JobStatus

    job._end(JobOutcome(JobStatus.FINISHED))
    assert [r["i"] for r in it] == [7, 8]
