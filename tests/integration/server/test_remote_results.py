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
