"""``JobHandle.results()`` of a job on the train server yields reports while it runs."""

from __future__ import annotations

from tests.integration.server.conftest import run_client

CLIENT = """
import sys, time
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig

def loop(config):
    for i in range(6):
        train.report({"i": i})
        time.sleep(0.2)

handle = DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1], name="r")
                             ).fit(block=False)
first = next(iter(handle.results()))
print("first", first["i"], handle.status())
print("all", [r["i"] for r in handle.results()])
"""


def test_results_of_a_server_job_arrive_while_it_runs(server, tmp_path):
    out = run_client(server, CLIENT, str(tmp_path), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    assert "first 0 RUNNING" in out.stdout
    assert "all [0, 1, 2, 3, 4, 5]" in out.stdout


LATE = """
import sys, time
import tandem
from tandem import train
from tandem.jobs.client import RemoteJobService
from tandem.jobs.events import Reported, StatusChanged
from tandem.train import DataParallelTrainer, RunConfig

def loop(config):
    for i in range(5):
        train.report({"i": i})

handle = DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1], name="late")
                             ).fit(block=False)
handle.wait()  # over before anyone follows its event stream with a listener
heard = []

def listener(event):
    if isinstance(event, StatusChanged):
        heard.append(event.status.value)
    elif isinstance(event, Reported):
        heard.extend(r["i"] for r in event.rows)

service = RemoteJobService()
job = service.get(handle.job_id)
job.listener = listener
job.follow()
job.wait_outcome(60)
print("heard", heard)
"""


def test_a_listener_that_follows_a_finished_job_hears_it_run(server, tmp_path):
    """A job that ran (and ended) before its stream was followed: the listener hears
    RUNNING before its reports, as it would have live (a Tuner's trial whose job was that
    quick lost all its results: the tuner drops reports of a trial it has not seen start)."""
    out = run_client(server, LATE, str(tmp_path), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    assert "heard ['RUNNING', 0, 1, 2, 3, 4, 'FINISHED']" in out.stdout, out.stdout
