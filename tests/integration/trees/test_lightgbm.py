"""LightGBMTrainer on real worker processes: one model through LightGBM's network."""

from __future__ import annotations

import json
import os
import re
import signal
import time

import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, make_classification
from sklearn.metrics import log_loss

import tandem
from tandem import train, tune
from tandem._core.errors import ConfigError
from tandem.train import FailureConfig, RunConfig, ScalingConfig
from tandem.train.lightgbm import (
    LightGBMTrainer,
    RayTrainReportCallback,
    ReportCallback,
    get_network_params,
)
from tandem.tune import TuneConfig, Tuner
from tandem.tune.schedulers import ASHAScheduler
from tests.conftest import worker_processes

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"],
          "num_leaves": 15, "verbose": -1}


@pytest.fixture
def cancer():
    return load_breast_cancer(as_frame=True).frame


def rows(run_path: str) -> list[dict]:
    with open(os.path.join(run_path, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def single_process_logloss(df: pd.DataFrame, rounds: int) -> float:
    import lightgbm

    x, y = df.drop(columns=["target"]), df["target"]
    booster = lightgbm.train(PARAMS, lightgbm.Dataset(x, label=y), rounds)
    return float(log_loss(y, booster.predict(x)))


def test_params_form_two_workers_one_model(storage, cancer):
    tandem.init(num_cpus=2)
    result = LightGBMTrainer(
        params=PARAMS, label_column="target", num_boost_round=15,
        datasets={"train": cancer, "valid": cancer.iloc[::3]},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="lgbm"),
    ).fit()
    assert set(result.metrics) == {"train-binary_logloss", "train-binary_error",
                                   "valid-binary_logloss", "valid-binary_error"}
    assert [r["training_iteration"] for r in rows(result.path)] == list(range(1, 16))
    booster = LightGBMTrainer.get_model(result.checkpoint)
    assert booster.current_iteration() == 15
    x, y = cancer.drop(columns=["target"]), cancer["target"]
    # the reported metric is over all rows (both workers'), not rank 0's half
    assert result.metrics["train-binary_logloss"] == pytest.approx(
        log_loss(y, booster.predict(x)), rel=1e-6)
    # and the model is the one single-process LightGBM grows from all the rows, up to the
    # histogram bins each worker finds on its own shard
    assert result.metrics["train-binary_logloss"] == pytest.approx(
        single_process_logloss(cancer, 15), rel=0.1)


def fn_form(config):
    import lightgbm

    net = get_network_params()
    assert net["num_machines"] == 2 and len(net["machines"].split(",")) == 2
    shard = train.get_dataset_shard("train")
    ds = lightgbm.Dataset(shard.drop(columns=["target"]), label=shard["target"])
    start = None
    if train.get_checkpoint():
        start = RayTrainReportCallback.get_model(train.get_checkpoint())
    booster = lightgbm.train({**config["params"], **net, "tree_learner": "data"}, ds,
                             config["rounds"], valid_sets=[ds], valid_names=["train"],
                             init_model=start, callbacks=[ReportCallback(frequency=4)])
    # the two workers grew the same trees: a shared model, not two
    out = os.path.join(config["out"], f"model_{train.get_context().get_world_rank()}.txt")
    booster.save_model(out)


def test_function_form_network_of_two(storage, cancer, tmp_path):
    tandem.init(num_cpus=2)
    result = LightGBMTrainer(
        fn_form, train_loop_config={"params": PARAMS, "rounds": 8, "out": str(tmp_path)},
        datasets={"train": cancer}, scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="fn"),
    ).fit()
    trees = [(tmp_path / f"model_{r}.txt").read_text().split("end of trees")[0] for r in (0, 1)]
    assert trees[0] == trees[1]
    assert [r["training_iteration"] for r in rows(result.path)] == list(range(1, 9))
    assert sorted(d for d in os.listdir(result.path) if d.startswith("checkpoint_")) == [
        "checkpoint_000004", "checkpoint_000008"]
    assert "train-binary_logloss" in result.metrics


def test_sigkill_resumes_from_last_checkpointed_round(storage):
    tandem.init(num_cpus=2)
    x, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)]).assign(label=y)
    rounds = 300
    handle = LightGBMTrainer(
        params={"objective": "binary", "num_leaves": 63, "verbose": -1},
        label_column="label", num_boost_round=rounds, datasets={"train": df},
        scaling_config=ScalingConfig(num_workers=2),
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
    assert iterations[-1] == rounds and iterations.count(1) == 1
    with open(os.path.join(run, "logs", "rank_0.log")) as f:
        log = f.read()
    resumed = [int(m) for m in re.findall(r"resuming at round (\d+) of 300", log)]
    assert len(resumed) == 1 and resumed[0] >= 21 and resumed[0] % 10 == 1, log[-2000:]
    assert LightGBMTrainer.get_model(result.checkpoint).current_iteration() == rounds


def test_tune_params_with_asha(storage):
    tandem.init(num_cpus=2)
    x, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)]).assign(label=y)
    trainer = LightGBMTrainer(
        params={"objective": "binary", "metric": "binary_logloss", "verbose": -1},
        label_column="label", num_boost_round=40, datasets={"train": df},
        scaling_config=ScalingConfig(num_workers=2),
    )
    grid = Tuner(
        trainer,
        param_space={"params": {"num_leaves": tune.grid_search([63, 4, 2])}},
        tune_config=TuneConfig(metric="train-binary_logloss", mode="min",
                               max_concurrent_trials=1,
                               scheduler=ASHAScheduler(max_t=40, grace_period=4,
                                                       reduction_factor=3)),
        run_config=RunConfig(storage_path=storage, name="asha", verbose=0),
    ).fit()
    assert not grid.errors
    iters = {r.config["params"]["num_leaves"]: len(r.metrics_dataframe) for r in grid}
    assert iters[63] == 40 and min(iters.values()) < 40
    best = grid.get_best_result()
    assert best.config["params"]["num_leaves"] == 63
    assert LightGBMTrainer.get_model(best.checkpoint).current_iteration() == 40


def test_bad_input_is_refused_before_workers_start(cancer):
    sc = ScalingConfig(num_workers=2)
    with pytest.raises(ConfigError, match=r"LightGBM rejected params.*[Uu]nknown objective"):
        LightGBMTrainer(params={"objective": "nope"}, label_column="target",
                        datasets={"train": cancer}, scaling_config=sc)
    with pytest.raises(ConfigError, match=r"label_column='y' is not a column"):
        LightGBMTrainer(params=PARAMS, label_column="y", datasets={"train": cancer},
                        scaling_config=sc)
    with pytest.raises(ConfigError, match=r"has 1 rows but scaling_config asks for 2"):
        LightGBMTrainer(params=PARAMS, label_column="target", datasets={"train": cancer[:1]},
                        scaling_config=sc)
    assert worker_processes() == []


def test_network_joins_at_first_try(storage):
    """LightGBM's own start makes the lower rank connect to the higher one and, when the peer
    is not listening yet, sleep 200 ms (then longer) before it tries again: on main that hit
    most 2-worker fits (4 of 6 here). tandem orders the start: no connection may fail."""
    tandem.init(num_cpus=2)
    x, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)]).assign(label=y)
    for i in range(5):
        result = LightGBMTrainer(
            params={**PARAMS, "verbose": 0},  # LightGBM's warnings on
            label_column="label", num_boost_round=3, datasets={"train": df},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=storage, name=f"net{i}", verbose=0),
        ).fit()
        logs = [read(os.path.join(result.path, "logs", f"rank_{r}.log")) for r in (0, 1)]
        assert "total number of machines: 2" in logs[0] and "Connected to rank 1" in logs[0]
        assert "failed" not in logs[0] + logs[1], logs[0][:2000]
        assert result.metrics["train-binary_logloss"] < 0.69
