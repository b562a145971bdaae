"""The job contract's conformance suite on real train jobs (worker processes) against the
embedded service, a job submitted from inside a worker (the nested service) and a real
train server (the remote service). Ray: tests/integration/ray/test_job_contract_ray.py."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem.cluster.local import LocalCluster
from tandem.jobs.client import RemoteJobService
from tandem.jobs.service import LocalJobService
from tandem.jobs.testing.service_conformance import CHECKS, REPORT_WINDOW, JobServiceTestCase
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig
from tandem.train.testing import TrainConformanceJobs
from tests.integration.server.conftest import start_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


class TestLocalServiceWithTrainJobs(JobServiceTestCase):
    @pytest.fixture
    def service(self):
        svc = LocalJobService(LocalCluster(num_cpus=2), report_window=REPORT_WINDOW)
        yield svc
        svc.shutdown()
        svc.cluster.shutdown()

    @pytest.fixture
    def jobs(self, storage):
        return TrainConformanceJobs(storage)


@pytest.fixture(scope="module")
def train_server(tmp_path_factory):
    root = tmp_path_factory.mktemp("contract-server")
    home = str(root / "home")
    os.makedirs(home)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HOME", home)
        mp.delenv("TANDEM_ADDRESS", raising=False)
        mp.delenv("TANDEM_TOKEN", raising=False)
        srv = start_server(home, str(root / "storage"))
        try:
            yield srv
        finally:
            srv.stop()


class TestRemoteServiceContract(JobServiceTestCase):
    @pytest.fixture
    def service(self, train_server):
        svc = RemoteJobService(train_server.address, train_server.token,
                               report_window=REPORT_WINDOW)
        yield svc
        svc.shutdown()

    @pytest.fixture
    def jobs(self, train_server):
        return TrainConformanceJobs(train_server.storage)


def _run_checks_in_a_worker(config):
    """A train function: runs every conformance check against the service a worker sees
    (the nested service: jobs go to the driver's service), reports the checks passed."""
    from tandem import train
    from tandem.jobs.runtime import get_service
    from tandem.jobs.testing.service_conformance import REPORT_WINDOW, run_all_checks
    from tandem.train.testing import TrainConformanceJobs

    service = get_service()
    service.report_window = REPORT_WINDOW
    done = run_all_checks(service, TrainConformanceJobs(config["storage"]), config["workdir"])
    train.report({"checks": done})


def test_nested_service_contract(storage, tmp_path):
    tandem.init(num_cpus=2)
    result = DataParallelTrainer(
        _run_checks_in_a_worker,
        train_loop_config={"storage": storage, "workdir": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=1),
        run_config=RunConfig(storage_path=storage, name="nested-contract"),
    ).fit()
    assert result.metrics["checks"] == [c.__name__ for c in CHECKS]
