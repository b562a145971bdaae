"""What the boosted-tree tests share: the data, the run's report rows, and each library's
trainer with the params its tests use."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest
from sklearn.datasets import load_breast_cancer, make_classification


@dataclass(frozen=True)
class Lib:
    name: str
    trainer: Any
    params: dict[str, Any]  # binary classification on "label" / "target", logloss first
    metrics: tuple[str, ...]  # what those params report on "train"
    tuned: tuple[str, list[Any]]  # a param and values, the best first (for ASHA)


def _libs() -> dict[str, Lib]:
    from tandem.train.lightgbm import LightGBMTrainer
    from tandem.train.xgboost import XGBoostTrainer

    return {
        "xgboost": Lib("xgboost", XGBoostTrainer,
                       {"objective": "binary:logistic", "eval_metric": ["logloss", "error"]},
                       ("train-logloss", "train-error"), ("max_depth", [6, 2, 1])),
        "lightgbm": Lib("lightgbm", LightGBMTrainer,
                        {"objective": "binary", "metric": ["binary_logloss", "binary_error"],
                         "verbose": -1},
                        ("train-binary_logloss", "train-binary_error"),
                        ("num_leaves", [63, 4, 2])),
    }


@pytest.fixture(params=["xgboost", "lightgbm"])
def lib(request: pytest.FixtureRequest) -> Lib:
    return _libs()[request.param]


@pytest.fixture
def cancer() -> pd.DataFrame:
    return load_breast_cancer(as_frame=True).frame


@pytest.fixture
def synthetic() -> pd.DataFrame:
    """20,000 rows x 20 features, a binary ``label``."""
    x, y = make_classification(n_samples=20000, n_features=20, random_state=0)
    return pd.DataFrame(x, columns=[f"f{i}" for i in range(20)]).assign(label=y)


def rows(run_path: str) -> list[dict]:
    """The reports of a run, in order."""
    with open(os.path.join(run_path, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def read(path: str) -> str:
    with open(path) as f:
        return f.read()
