"""The job contract's conformance suite against the embedded service placing train jobs
on the two-node Ray cluster (workers are Ray actors)."""

from __future__ import annotations

import pytest

from tandem.cluster.ray import RayCluster
from tandem.jobs.service import LocalJobService
from tandem.jobs.testing.service_conformance import REPORT_WINDOW, JobServiceTestCase
from tandem.train.testing import TrainConformanceJobs

pytestmark = [pytest.mark.slow, pytest.mark.ray, pytest.mark.timeout(120), pytest.mark.ray_cluster]


class TestRayServiceContract(JobServiceTestCase):
    @pytest.fixture
    def service(self, ray_cluster):
        svc = LocalJobService(RayCluster(ray_cluster.cluster.address),
                              report_window=REPORT_WINDOW)
        yield svc
        svc.shutdown()
        svc.cluster.shutdown()

    @pytest.fixture
    def jobs(self, storage):
        return TrainConformanceJobs(storage)
