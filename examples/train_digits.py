"""Train an MLP on digits with 2 DDP workers on the CPU, a checkpoint per epoch.

    pip install -e ".[torch]"
    python examples/train_digits.py [--epochs 10]

Kill a worker while it runs (``pkill -9 -f tandem.cluster._zygote`` kills them all; a
single ``kill -9 <worker pid>`` kills one) and watch the run resume from its latest
checkpoint: ``FailureConfig(max_failures=3)`` allows three restarts.
"""

from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits import train_loop  # noqa: E402

from tandem.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from tandem.train.torch import TorchTrainer  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"lr": 0.05, "epochs": args.epochs, "hidden": 64},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(
            name="digits_ddp",
            storage_path=args.storage,
            failure_config=FailureConfig(max_failures=3),
            checkpoint_config=CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="accuracy"),
        ),
    )
    result = trainer.fit()
    print(f"\nfinal accuracy: {result.metrics['accuracy']:.3f} after {result.metrics['epoch'] + 1} epochs")
    print(f"results and checkpoints: {result.path}")
    print(f"latest checkpoint: {result.checkpoint.path}")


if __name__ == "__main__":
    main()
