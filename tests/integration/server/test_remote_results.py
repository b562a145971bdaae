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


ODD = """
import json, math, sys
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig

def loop(config):
    train.report({"nan": float("nan"), "inf": float("inf"), "none": None, "big": 2**70,
                  "text": "caf\\u00e9 \\u2603 null", "small": 1e-05, "nested": {"a": [1, 2.5]}})
    for i in range(300):
        train.report({"i": i, "loss": 1.0 / (i + 1)})

handle = DataParallelTrainer(loop, run_config=RunConfig(storage_path=sys.argv[1], name="odd")
                             ).fit(block=False)
live = list(handle.results())  # the event stream, while it runs
handle.wait()
stored = list(handle.results())  # the job has ended: read back from the job store
for rows in (live, stored):
    first = rows[0]
    print(math.isnan(first["nan"]), first["inf"], first["none"], first["big"], first["text"],
          first["small"], first["nested"])
    print("order", [r["i"] for r in rows[1:]] == list(range(300)),
          all(r["loss"] == 1.0 / (r["i"] + 1) for r in rows[1:]))
"""


def test_result_values_survive_the_server_exactly(server, tmp_path):
    """Rows are encoded by orjson where that gives json's value and by the json module
    otherwise (NaN and the infinities, None, ints past 64 bits): the stream and the store
    give back exactly what was reported, complete and in order."""
    out = run_client(server, ODD, str(tmp_path), str(tmp_path / "res"))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    first = "True inf None 1180591620717411303424 café ☃ null 1e-05 {'a': [1, 2.5]}"
    assert lines.count(first) == 2, out.stdout
    assert lines.count("order True True") == 2, out.stdout


def test_health_says_when_the_server_is_warm(server):
    """``/api/health``'s ``warm``: the server and its worker launcher have imported what a
    first job would (``server.warmup``); False until then, True for good after."""
    import time

    deadline = time.monotonic() + 120
    with server.http() as c:
        while True:
            health = c.get("/api/health").json()
            assert isinstance(health["warm"], bool)
            if health["warm"] or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert health["warm"] is True
