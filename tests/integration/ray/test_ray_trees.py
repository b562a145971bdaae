"""Boosted trees on Ray: a ray.data.Dataset is split by Ray and each worker trains on its
part of one model (XGBoost's collective across Ray actors)."""

from __future__ import annotations

import pytest
from sklearn.datasets import load_breast_cancer

import tandem
from tandem.train import RunConfig, ScalingConfig
from tandem.train.xgboost import XGBoostTrainer

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.timeout(240), pytest.mark.ray_cluster]


def test_xgboost_on_ray_with_a_ray_dataset(storage):
    import xgboost

    tandem.init(cluster="ray")
    df = load_breast_cancer(as_frame=True).frame
    params = {"objective": "binary:logistic", "eval_metric": "logloss", "max_depth": 3}
    result = XGBoostTrainer(
        params=params, label_column="target", num_boost_round=8,
        datasets={"train": ray.data.from_pandas(df)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="xgb_ray"),
    ).fit()
    d = xgboost.DMatrix(df.drop(columns=["target"]), label=df["target"])
    log: dict = {}
    xgboost.train(params, d, 8, evals=[(d, "train")], evals_result=log, verbose_eval=False)
    # Ray's equal split may leave out a row; the model is still the all-rows model
    assert result.metrics["train-logloss"] == pytest.approx(log["train"]["logloss"][-1],
                                                            rel=0.02)
    assert XGBoostTrainer.get_model(result.checkpoint).num_boosted_rounds() == 8
