"""XGBoostTrainer on real worker processes: one model through XGBoost's collective."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

import tandem
from tandem import train
from tandem._core.errors import ConfigError
from tandem.train import RunConfig, ScalingConfig
from tandem.train.xgboost import RayTrainReportCallback, ReportCallback, XGBoostTrainer
from tests.integration.trees.conftest import rows

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PARAMS = {"objective": "binary:logistic", "eval_metric": ["logloss", "error"], "max_depth": 4}




def single_process(df: pd.DataFrame, rounds: int) -> dict[str, float]:
    import xgboost

    d = xgboost.DMatrix(df.drop(columns=["target"]), label=df["target"])
    log: dict = {}
    xgboost.train(PARAMS, d, rounds, evals=[(d, "train")], evals_result=log,
                  verbose_eval=False)
    return {f"train-{k}": v[-1] for k, v in log["train"].items()}




def test_params_form_two_workers_match_single_process(storage, cancer):
    tandem.init(num_cpus=2)
    result = XGBoostTrainer(
        params=PARAMS, label_column="target", num_boost_round=12,
        datasets={"train": cancer, "valid": cancer.iloc[::3]},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="xgb"),
    ).fit()
    expected = single_process(cancer, 12)
    # the shards were combined: the 2-worker model is the single-process model
    assert result.metrics["train-logloss"] == pytest.approx(expected["train-logloss"], rel=1e-3)
    assert result.metrics["train-error"] == pytest.approx(expected["train-error"], abs=1e-3)
    assert set(result.metrics) == {"train-logloss", "train-error", "valid-logloss",
                                   "valid-error"}
    reported = rows(result.path)
    assert [r["training_iteration"] for r in reported] == list(range(1, 13))  # one per round
    # checkpoints every 10 rounds (default) and at the end
    assert sorted(d for d in os.listdir(result.path) if d.startswith("checkpoint_")) == [
        "checkpoint_000010", "checkpoint_000012"]
    booster = XGBoostTrainer.get_model(result.checkpoint)
    assert booster.num_boosted_rounds() == 12
    import xgboost

    pred = booster.predict(xgboost.DMatrix(cancer.drop(columns=["target"])))
    assert ((pred > 0.5) == cancer["target"]).mean() > 0.95


def fn_form(config):
    import xgboost
    import xgboost.collective as coll

    ctx = train.get_context()
    assert coll.get_world_size() == 2, coll.get_world_size()
    assert coll.get_rank() == ctx.get_world_rank()
    shard = train.get_dataset_shard("train")
    with open(os.path.join(config["out"], f"rows_{ctx.get_world_rank()}"), "w") as f:
        f.write(str(len(shard)))
    d = xgboost.DMatrix(shard.drop(columns=["target"]), label=shard["target"])
    start = None
    ckpt = train.get_checkpoint()
    if ckpt:
        start = RayTrainReportCallback.get_model(ckpt)
    xgboost.train(config["params"], d, config["rounds"], evals=[(d, "train")],
                  xgb_model=start, callbacks=[ReportCallback(frequency=5)], verbose_eval=False)


def test_function_form_world_size_two_and_report_callback(storage, cancer, tmp_path):
    tandem.init(num_cpus=2)
    result = XGBoostTrainer(
        fn_form, train_loop_config={"params": PARAMS, "rounds": 8, "out": str(tmp_path)},
        datasets={"train": cancer}, scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="fn"),
    ).fit()
    # each worker held its half of the rows
    assert {(tmp_path / f"rows_{r}").read_text() for r in (0, 1)} == {str(len(cancer) // 2)}
    expected = single_process(cancer.iloc[: 2 * (len(cancer) // 2)], 8)
    assert result.metrics["train-logloss"] == pytest.approx(expected["train-logloss"], rel=1e-3)
    assert [r["training_iteration"] for r in rows(result.path)] == list(range(1, 9))
    assert XGBoostTrainer.get_model(result.checkpoint).num_boosted_rounds() == 8






def test_files_categories_and_missing_values(storage, tmp_path):
    tandem.init(num_cpus=2)
    rng = np.random.default_rng(0)
    n = 4000
    colour = rng.choice(["red", "green", "blue"], n)
    x = rng.normal(size=n)
    x[rng.random(n) < 0.1] = np.nan  # missing values
    y = ((colour == "red") ^ (np.nan_to_num(x) > 0.5)).astype(int)
    df = pd.DataFrame({"colour": pd.Categorical(colour, categories=["red", "green", "blue"]),
                       "x": x, "y": y})
    by_colour = df.sort_values("colour", kind="stable")
    for i in range(4):  # 4 files, each with only the colours it holds: workers read 2 each
        part = by_colour.iloc[i * 1000:(i + 1) * 1000]
        part.assign(colour=pd.Categorical(part.colour.astype(str))).to_parquet(
            tmp_path / f"part{i}.parquet")
    df.to_csv(tmp_path / "all.csv", index=False)
    df.assign(colour=df.colour.cat.codes).to_csv(tmp_path / "codes.csv", index=False)
    params = {"objective": "binary:logistic", "eval_metric": "error", "max_depth": 3,
              "max_cat_to_onehot": 1}
    result = XGBoostTrainer(
        params=params, label_column="y", num_boost_round=10,
        datasets={"train": str(tmp_path / "part*.parquet"), "valid": df.iloc[:500]},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="files"),
    ).fit()
    assert result.metrics["train-error"] < 0.02 and result.metrics["valid-error"] < 0.02
    csv = XGBoostTrainer(
        params=params, label_column="y", num_boost_round=3,
        datasets={"train": str(tmp_path / "codes.csv")},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="csv"),
    ).fit()
    assert "train-error" in csv.metrics
    # a CSV's text column is named before any worker starts
    with pytest.raises(ConfigError, match=r"\['colour'\] are not numeric"):
        XGBoostTrainer(params=params, label_column="y",
                       datasets={"train": str(tmp_path / "all.csv")},
                       scaling_config=ScalingConfig(num_workers=2))
