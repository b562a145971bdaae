"""XGBoost on the breast-cancer data with 2 workers, then a small tuning sweep.

    pip install -e ".[xgboost]"
    python examples/xgboost_breast_cancer.py [--storage DIR]

The two workers each hold half of the rows and grow one model together through XGBoost's
collective; every boosting round is reported as ``train-logloss`` / ``valid-error`` etc.,
the booster is checkpointed every 10 rounds and at the end. The Tuner then tries
``max_depth`` in {4, 5, 6}; each trial is such a 2-worker run.
"""

from __future__ import annotations

import argparse

from sklearn.datasets import load_breast_cancer
from sklearn.model_selection import train_test_split

from tandem import tune
from tandem.train import RunConfig, ScalingConfig
from tandem.train.xgboost import XGBoostTrainer
from tandem.tune import TuneConfig, Tuner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()

    data = load_breast_cancer(as_frame=True).frame
    train_df, valid_df = train_test_split(data, test_size=0.25, random_state=0)

    trainer = XGBoostTrainer(
        params={
            "objective": "binary:logistic",
            "eval_metric": ["logloss", "error"],
            "max_depth": 4,
        },
        label_column="target",
        num_boost_round=20,
        datasets={"train": train_df, "valid": valid_df},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=args.storage, verbose=0),
    )
    result = trainer.fit()
    booster = XGBoostTrainer.get_model(result.checkpoint)
    print(f"train-logloss {result.metrics['train-logloss']:.4f}, "
          f"valid-error {result.metrics['valid-error']:.4f} after "
          f"{booster.num_boosted_rounds()} rounds; booster in {result.checkpoint.path}")

    tuner = Tuner(
        trainer,
        param_space={"params": {"max_depth": tune.choice([4, 5, 6])}},
        tune_config=TuneConfig(metric="train-logloss", mode="min", num_samples=2),
        run_config=RunConfig(storage_path=args.storage, verbose=0),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print(f"best max_depth {best.config['params']['max_depth']}: "
          f"train-logloss {best.metrics['train-logloss']:.4f}")


if __name__ == "__main__":
    main()
