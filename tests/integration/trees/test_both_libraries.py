"""What XGBoostTrainer and LightGBMTrainer must both do, on real worker processes: resume
after a SIGKILL from the last checkpointed round, tune with ASHA over rounds, refuse bad
input before any worker starts."""

from __future__ import annotations

import os
import re
import signal
import time

import pytest

import tandem
from tandem import tune
from tandem._core.errors import ConfigError
from tandem.train import FailureConfig, RunConfig, ScalingConfig
from tandem.tune import TuneConfig, Tuner
from tandem.tune.schedulers import ASHAScheduler
from tests.integration.trees.conftest import read, rows
from tests.processes import no_workers_left, worker_processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def test_sigkill_resumes_from_last_checkpointed_round(storage, lib, synthetic):
    tandem.init(num_cpus=2)
    rounds = 300
    deep = {"max_depth": 8} if lib.name == "xgboost" else {"num_leaves": 63}
    handle = lib.trainer(
        params={**lib.params, **deep}, label_column="label", num_boost_round=rounds,
        datasets={"train": synthetic}, scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="kill",
                             failure_config=FailureConfig(max_failures=1)),
    ).fit(block=False)
    run = os.path.join(storage, "kill")
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(run, "checkpoint_000020")):
        assert time.monotonic() < deadline, "no checkpoint at round 20"
        time.sleep(0.05)
    victims = worker_processes()
    assert len(victims) == 2
    os.kill(max(victims, key=lambda p: p.create_time()).pid, signal.SIGKILL)
    assert len(rows(run)) < rounds  # killed mid-training
    result = handle.wait()
    iterations = [r["training_iteration"] for r in rows(run)]
    assert iterations[-1] == rounds
    assert iterations.count(1) == 1  # never started again from round 0
    log = read(os.path.join(run, "logs", "rank_0.log"))
    resumed = [int(m) for m in re.findall(rf"resuming at round (\d+) of {rounds}", log)]
    assert len(resumed) == 1 and resumed[0] >= 21 and resumed[0] % 10 == 1, log[-2000:]
    assert lib.trainer.rounds_in(lib.trainer.get_model(result.checkpoint)) == rounds


def test_tune_params_with_asha_over_rounds(storage, lib, synthetic):
    tandem.init(num_cpus=2)
    trainer = lib.trainer(params=lib.params, label_column="label", num_boost_round=40,
                          datasets={"train": synthetic},
                          scaling_config=ScalingConfig(num_workers=2))
    key, values = lib.tuned
    grid = Tuner(
        trainer,
        param_space={"params": {key: tune.grid_search(values)}},
        tune_config=TuneConfig(metric=lib.metrics[0], mode="min", max_concurrent_trials=1,
                               scheduler=ASHAScheduler(max_t=40, grace_period=4,
                                                       reduction_factor=3)),
        run_config=RunConfig(storage_path=storage, name="asha", verbose=0),
    ).fit()
    assert not grid.errors
    by_value = {r.config["params"][key]: r for r in grid}
    assert set(by_value) == set(values)
    # the trial's params are the trainer's with the tuned one merged in (metrics kept)
    assert all(set(lib.metrics) <= set(r.metrics) for r in grid)
    iters = {v: len(r.metrics_dataframe) for v, r in by_value.items()}
    assert iters[values[0]] == 40  # the best went the distance
    assert min(iters.values()) < 40  # ASHA stopped a worse one early, between rounds
    best = grid.get_best_result()
    assert best.config["params"][key] == values[0]
    assert lib.trainer.rounds_in(lib.trainer.get_model(best.checkpoint)) == 40


def test_bad_input_is_refused_before_workers_start(lib, cancer):
    sc = ScalingConfig(num_workers=2)
    with pytest.raises(ConfigError, match=r"label_column='nope' is not a column"):
        lib.trainer(params=lib.params, label_column="nope", datasets={"train": cancer},
                    scaling_config=sc)
    with pytest.raises(ConfigError, match=r"\['name'\] are not numeric.*astype\('category'\)"):
        lib.trainer(params=lib.params, label_column="target",
                    datasets={"train": cancer.assign(name="a")}, scaling_config=sc)
    rejected = (r"XGBoost rejected params.*binary:nope" if lib.name == "xgboost"
                else r"LightGBM rejected params.*[Uu]nknown objective")
    with pytest.raises(ConfigError, match=rejected):
        lib.trainer(params={"objective": "binary:nope"}, label_column="target",
                    datasets={"train": cancer}, scaling_config=sc)
    with pytest.raises(ConfigError, match=r"has 3 rows but scaling_config asks for 4"):
        lib.trainer(params=lib.params, label_column="target", datasets={"train": cancer[:3]},
                    scaling_config=ScalingConfig(num_workers=4))
    with pytest.raises(ConfigError, match=r"train_loop_config"):
        Tuner(lib.trainer(params=lib.params, label_column="target",
                          datasets={"train": cancer}),
              param_space={"max_depth": tune.choice([1, 2])})
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'nope_config'"):
        lib.trainer(params=lib.params, label_column="target", datasets={"train": cancer},
                    nope_config=1)
    assert no_workers_left() == []


def test_tuned_num_workers_with_in_memory_data(storage, lib, cancer):
    """A Tuner's param_space over num_workers: the DataFrame was split for the trainer's 2
    workers; a 1-worker trial takes both pieces (every row), a 3-worker one is refused with
    what to do."""
    tandem.init(num_cpus=2)
    trainer = lib.trainer(params=lib.params, label_column="target", num_boost_round=5,
                          datasets={"train": cancer},
                          scaling_config=ScalingConfig(num_workers=2))
    grid = Tuner(trainer, param_space={"scaling_config": {"num_workers": tune.grid_search(
                     [1, 2])}},
                 tune_config=TuneConfig(metric=lib.metrics[0], mode="min"),
                 run_config=RunConfig(storage_path=storage, name="workers", verbose=0)).fit()
    assert not grid.errors, grid.errors
    by_count = {r.config["scaling_config"]["num_workers"]: r for r in grid}
    assert set(by_count) == {1, 2}
    losses = [by_count[n].metrics[lib.metrics[0]] for n in (1, 2)]
    # one model from all 569 rows either way (rank 0's half alone would differ more)
    assert losses[1] == pytest.approx(losses[0], rel=0.05)
    three = Tuner(trainer, param_space={"scaling_config": {
                      "num_workers": 3, "resources_per_worker": {"CPU": 0.5}}},
                  tune_config=TuneConfig(metric=lib.metrics[0], mode="min"),
                  run_config=RunConfig(storage_path=storage, name="three", verbose=0)).fit()
    assert len(three.errors) == 1
    assert re.search(r"split into 2 pieces.*3 workers cannot share.*multiple of every count",
                     str(three.errors[0]), re.DOTALL)
