"""ResourceChangingScheduler on a real Tuner: a trial's resources change at a checkpoint
boundary (paused with its checkpoint, resumed as a new worker holding the new resources),
and a trial really gets the CPUs another one gave back by finishing."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

import tandem
from tandem import tune
from tandem.tune.schedulers import (
    DistributeResources,
    FIFOScheduler,
    ResourceChangingScheduler,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _train(config):
    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            start = json.load(f)["step"]
    resources = tune.get_context().get_trial_resources()
    cpus = resources.required_resources.get("CPU", 0)
    threads = int(os.environ.get("OMP_NUM_THREADS", "0"))  # what the worker was given
    for step in range(start + 1, 10_000):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"score": step, "step": step, "cpus": cpus, "threads": threads,
                         "resumed_from": start},
                        checkpoint=tune.Checkpoint.from_directory(d))
        # the short trial ends after 3 steps; the long one once it holds all 4 CPUs,
        # which it can only get after the short one has ended
        if (config["kind"] == "short" and step >= 3) or cpus >= 4:
            return


def test_trial_gets_the_cpus_a_finished_trial_gave_back(storage):
    tandem.init(num_cpus=4)
    scheduler = ResourceChangingScheduler(
        base_scheduler=FIFOScheduler(),
        resources_allocation_function=DistributeResources(add_bundles=False))
    grid = tune.Tuner(
        tune.with_resources(_train, tune.PlacementGroupFactory([{"CPU": 1}])),
        param_space={"kind": tune.grid_search(["short", "long"])},
        tune_config=tune.TuneConfig(scheduler=scheduler, metric="score", mode="max"),
        run_config=tune.RunConfig(name="rcs", storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    by_kind = {r.config["kind"]: r for r in grid}
    with open(os.path.join(by_kind["long"].path, "result.json")) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    cpus = [r["cpus"] for r in rows]
    assert cpus[0] == 1 and cpus[-1] == 4  # started with its base, ended with all four
    assert cpus == sorted(cpus)  # only ever grew
    assert all(r["threads"] == r["cpus"] for r in rows)  # the worker really held them
    # every change resumed from the latest checkpoint: steps go on without a gap or repeat
    assert [r["step"] for r in rows] == list(range(1, len(rows) + 1))
    assert sum(1 for a, b in zip(cpus, cpus[1:]) if a != b) == \
        len({r["resumed_from"] for r in rows}) - 1
    assert by_kind["short"].metrics["step"] == 3


class _Sized(tune.Trainable):
    @classmethod
    def default_resource_request(cls, config):
        # a head bundle for the trainable, one more for what it would start (Ray's pattern)
        return tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": config["extra"]}])

    def step(self):
        return {"threads": int(os.environ.get("OMP_NUM_THREADS", "0")),
                "cpus": self.trial_resources.required_resources["CPU"], "done": True}

    def save_checkpoint(self, checkpoint_dir):
        return {}

    def load_checkpoint(self, checkpoint):
        pass


def test_default_resource_request_sizes_each_trial(storage):
    tandem.init(num_cpus=3)
    grid = tune.Tuner(
        _Sized, param_space={"extra": tune.grid_search([1, 2])},
        run_config=tune.RunConfig(name="sized", storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    got = sorted((r.config["extra"], r.metrics["cpus"], r.metrics["threads"]) for r in grid)
    assert got == [(1, 2.0, 2), (2, 3.0, 3)]  # the worker held the sum of the bundles
