"""A plain training script; `tandem submit` sends its fit() to the train server."""

import sys

from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def loop(config):
    rank = train.get_context().get_world_rank()
    print(f"rank {rank} trains with lr={config['lr']}", flush=True)
    for step in range(3):
        train.report({"step": step, "loss": config["lr"] / (step + 1)})


result = DataParallelTrainer(loop, train_loop_config={"lr": float(sys.argv[1])},
                             scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="submitted")).fit()
print(f"RESULT loss={result.metrics['loss']:.3f} path={result.path}")
