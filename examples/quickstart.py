"""tandem quickstart: tune an MLP on digits — every trial a 2-worker DDP job — with ASHA.

    pip install -e ".[torch]"
    python examples/quickstart.py [--samples 8] [--epochs 8]

Each trial is a train job of 2 DDP workers; the job service starts a trial only when
its whole gang fits, so on 2 CPUs trials run one after another with no deadlock and no
``max_concurrent_trials`` to compute. ASHA stops poor trials early.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits import train_loop  # noqa: E402

from tandem import tune  # noqa: E402
from tandem.train import RunConfig, ScalingConfig  # noqa: E402
from tandem.train.torch import TorchTrainer  # noqa: E402
from tandem.tune.schedulers import ASHAScheduler  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=8)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()

    trainer = TorchTrainer(train_loop, scaling_config=ScalingConfig(num_workers=2))
    tuner = tune.Tuner(
        trainer,
        param_space={"train_loop_config": {
            "lr": tune.loguniform(1e-3, 3e-1),
            "hidden": tune.choice([32, 64, 128]),
            "momentum": tune.uniform(0.5, 0.95),
            "epochs": args.epochs,
        }},
        tune_config=tune.TuneConfig(
            metric="accuracy", mode="max", num_samples=args.samples, seed=0,
            scheduler=ASHAScheduler(time_attr="training_iteration", max_t=args.epochs,
                                    grace_period=2, reduction_factor=2),
        ),
        run_config=RunConfig(name="quickstart", storage_path=args.storage),
    )
    results = tuner.fit()
    best = results.get_best_result()
    print("\nbest config:", {k: round(v, 4) if isinstance(v, float) else v
                             for k, v in best.config["train_loop_config"].items()})
    print(f"best accuracy: {best.metrics['accuracy']:.3f} "
          f"(after {best.metrics['training_iteration']} epochs)")
    print(f"all results: {results.experiment_path}")


if __name__ == "__main__":
    main()
