"""Run callbacks (``tandem.train.Callback``): named events from one dispatcher, each
callback run in exactly one place and told which (driver or worker)."""

from __future__ import annotations

import json
import os

import pytest

import tandem
from tandem import train, tune
from tandem._core.errors import ConfigError
from tandem.model import ModelResult
from tandem.train import Callback, CallbackSite, DataParallelTrainer, RunConfig, ScalingConfig

pytestmark = pytest.mark.timeout(90)


class FileRecorder(Callback):
    """Appends one JSON line per event to a file (it may run in another process)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def _write(self, **event) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), **event}) + "\n")

    def on_run_start(self, context) -> None:
        self._write(event="start", site=context.site.value, run=context.run_name,
                    trial=context.trial_name)

    def on_report(self, rows) -> None:
        self._write(event="report", i=[r["i"] for r in rows])

    def on_end(self, result) -> None:
        self._write(event="end", i=result.metrics["i"])


def read_events(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f]


def loop(config):
    for i in range(3):
        train.report({"i": i})
    return 10 * train.get_context().get_world_rank()


def test_a_fit_runs_its_callbacks_in_the_driver_once(storage, tmp_path):
    path = str(tmp_path / "events.jsonl")
    tandem.init(num_cpus=2)
    result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=RunConfig(storage_path=storage, name="cb",
                                                      callbacks=[FileRecorder(path)])).fit()
    # what each rank's function returned: a declared field of the Result, kept by ModelResult
    assert result.return_value == 0 and result.return_values == [0, 10]  # rank 0's, as Ray
    assert ModelResult.from_result(result).return_values == [0, 10]
    events = read_events(path)
    assert events[0] == {"pid": os.getpid(), "event": "start", "site": "driver", "run": "cb",
                         "trial": None}
    assert [i for e in events if e["event"] == "report" for i in e["i"]] == [0, 1, 2]
    assert [e for e in events if e["event"] == "end"] == [
        {"pid": os.getpid(), "event": "end", "i": 2}]


@pytest.mark.slow
def test_a_run_started_by_a_trial_runs_its_callbacks_in_that_worker_only(storage, tmp_path):
    path = str(tmp_path / "events.jsonl")

    def trial_fn(config):
        DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=1),
                            run_config=RunConfig(storage_path=storage,
                                                 callbacks=[FileRecorder(path)])).fit()

    tandem.init(num_cpus=2)
    grid = tune.Tuner(trial_fn, run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid.num_errors == 0
    events = read_events(path)
    starts = [e for e in events if e["event"] == "start"]
    assert len(starts) == 1 and starts[0]["site"] == CallbackSite.WORKER.value
    assert starts[0]["pid"] != os.getpid()  # in the trial's worker, not in this driver
    assert {e["pid"] for e in events} == {starts[0]["pid"]}
    # every report and the end exactly once (the driver does not run them again)
    assert [i for e in events if e["event"] == "report" for i in e["i"]] == [0, 1, 2]
    assert len([e for e in events if e["event"] == "end"]) == 1


def test_an_object_that_is_not_a_callback_is_refused_up_front():
    class Duck:
        def on_report(self, rows):
            pass

    with pytest.raises(ConfigError, match="subclass tandem.train.Callback"):
        RunConfig(callbacks=[Duck()])
