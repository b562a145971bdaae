"""LightGBMTrainer on real worker processes: one model through LightGBM's network."""

from __future__ import annotations

import os

import pandas as pd
import pytest
from sklearn.datasets import make_classification
from sklearn.metrics import log_loss

import tandem
from tandem import train
from tandem.train import RunConfig, ScalingConfig
from tandem.train.lightgbm import (
    LightGBMTrainer,
    RayTrainReportCallback,
    ReportCallback,
    get_network_params,
)
from tests.integration.trees.conftest import read, rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PARAMS = {"objective": "binary", "metric": ["binary_logloss", "binary_error"],
          "num_leaves": 15, "verbose": -1}








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








def test_network_joins_at_first_try(storage):
    """LightGBM's own start makes the lower rank connect to the higher one and, when the peer
    is not listening yet, sleep 200 ms (then longer) before it tries again: on main that hit
    most 2-worker fits (4 of 6 here). tandem orders the start: no connection may fail."""
    tandem.init(num_cpus=2)
    x, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    df = pd.DataFrame(x, columns=[f"f{i}" for i in range(20)]).assign(label=y)
    for i, n in enumerate([2, 2, 2, 2, 2, 3]):  # and once 3 workers: ranks start 2, 1, 0
        result = LightGBMTrainer(
            params={**PARAMS, "verbose": 0},  # LightGBM's warnings on
            label_column="label", num_boost_round=3, datasets={"train": df},
            scaling_config=ScalingConfig(num_workers=n, resources_per_worker={"CPU": 2 / n}),
            run_config=RunConfig(storage_path=storage, name=f"net{i}", verbose=0),
        ).fit()
        logs = [read(os.path.join(result.path, "logs", f"rank_{r}.log")) for r in range(n)]
        assert f"total number of machines: {n}" in logs[0]
        assert all(f"Connected to rank {r}" in logs[0] for r in range(1, n))
        assert "failed" not in "".join(logs), logs[0][:2000]
        assert result.metrics["train-binary_logloss"] < 0.69
