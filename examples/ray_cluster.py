"""Train, then tune, on a Ray cluster: the same digits DDP loop as train_digits.py.

    pip install -e ".[torch,ray]"
    ray start --head --num-cpus 4          # or a cluster from Ray's launcher / KubeRay
    python examples/ray_cluster.py --address auto [--storage s3://bucket/runs]

Each job's workers are placed in one Ray placement group; a 4-worker run spans nodes when
no single node has 4 free CPUs. On a multi-node cluster give --storage a location every
node reaches (an fsspec URL such as s3://..., or a shared filesystem).
"""

from __future__ import annotations

import argparse
import os
import sys

import cloudpickle

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import digits  # noqa: E402
from digits import train_loop  # noqa: E402

import tandem  # noqa: E402
from tandem import tune  # noqa: E402
from tandem.train import FailureConfig, RunConfig, ScalingConfig  # noqa: E402
from tandem.train.torch import TorchTrainer  # noqa: E402
from tandem.tune import TuneConfig, Tuner  # noqa: E402

# Ray's nodes may not have this folder: send the training code along with each job.
cloudpickle.register_pickle_by_value(digits)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--address", default="auto", help="the Ray cluster ('auto' or HOST:PORT)")
    parser.add_argument("--storage", default=None, help="where runs go (shared by every node)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--epochs", type=int, default=10)
    args = parser.parse_args()

    tandem.init(cluster="ray", ray_address=args.address)

    trainer = TorchTrainer(
        train_loop,
        train_loop_config={"lr": 0.1, "epochs": args.epochs},
        scaling_config=ScalingConfig(num_workers=args.workers),
        run_config=RunConfig(name="digits_on_ray", storage_path=args.storage,
                             failure_config=FailureConfig(max_failures=2)),
    )
    result = trainer.fit()
    print(f"trained on Ray: accuracy {result.metrics['accuracy']:.3f}; run folder {result.path}")

    grid = Tuner(
        trainer,  # each trial is one train job: its own gang, its own placement group
        param_space={"train_loop_config": {"lr": tune.grid_search([0.01, 0.1]),
                                           "epochs": args.epochs},
                     "scaling_config": ScalingConfig(num_workers=2)},
        tune_config=TuneConfig(metric="accuracy", mode="max"),
        run_config=RunConfig(name="digits_tune_on_ray", storage_path=args.storage),
    ).fit()
    best = grid.get_best_result()
    print(f"tuned on Ray: best lr {best.config['train_loop_config']['lr']}, "
          f"accuracy {best.metrics['accuracy']:.3f}")
    tandem.shutdown()


if __name__ == "__main__":
    main()
