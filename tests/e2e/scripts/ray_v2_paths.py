"""A program written against the module paths Ray's API reference uses
(``ray.train.v2.api.*``, ``ray.tune.logger``, ``ray.tune.result``,
``ray.tune.search.concurrency_limiter``), with ``ray`` swapped for ``tandem`` only."""

import os
import tempfile

from tandem import tune
from tandem.train import Checkpoint
from tandem.train.v2.api.config import (
    CheckpointConfig,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from tandem.train.v2.api.context import TrainContext
from tandem.train.v2.api.data_parallel_trainer import DataParallelTrainer
from tandem.train.v2.api.exceptions import TrainingFailedError
from tandem.train.v2.api.result import Result
from tandem.train.v2.api.train_fn_utils import get_checkpoint, get_context, report
from tandem.tune.logger import TBXLoggerCallback
from tandem.tune.result import TRAINING_ITERATION
from tandem.tune.search import BasicVariantGenerator
from tandem.tune.search.concurrency_limiter import ConcurrencyLimiter


def train_fn(config):
    ctx = get_context()
    assert isinstance(ctx, TrainContext)
    start = 0
    ckpt = get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "step")) as f:
            start = int(f.read()) + 1
    for step in range(start, config["steps"]):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step"), "w") as f:
                f.write(str(step))
            report({"step": step, "world": ctx.get_world_size()},
                   checkpoint=Checkpoint.from_directory(d))
        if step == config.get("fail_at"):
            raise ValueError("boom")


trainer = DataParallelTrainer(
    train_fn,
    train_loop_config={"steps": 3},
    scaling_config=ScalingConfig(num_workers=2),
    run_config=RunConfig(name="v2_paths", checkpoint_config=CheckpointConfig(num_to_keep=1),
                         failure_config=FailureConfig(max_failures=0)),
)
result = trainer.fit()
assert isinstance(result, Result)
print(f"STEPS {result.metrics_dataframe['step'].tolist()} WORLD {result.metrics['world']}")
print(f"KEPT {sorted(n for n in os.listdir(result.path) if n.startswith('checkpoint_'))}")

try:
    DataParallelTrainer(train_fn, train_loop_config={"steps": 3, "fail_at": 0},
                        scaling_config=ScalingConfig(num_workers=1),
                        run_config=RunConfig(name="v2_fails")).fit()
except TrainingFailedError as e:
    print(f"FAILED {type(e).__name__} {'boom' in str(e)}")


def trainable(config):
    for i in range(2):
        tune.report({"score": config["x"] * (i + 1)})


grid = tune.Tuner(
    trainable,
    param_space={"x": tune.grid_search([1, 2, 3])},
    tune_config=tune.TuneConfig(
        metric="score", mode="max",
        search_alg=ConcurrencyLimiter(BasicVariantGenerator(), max_concurrent=2)),
    run_config=tune.RunConfig(name="v2_tune", callbacks=[TBXLoggerCallback()]),
).fit()
best = grid.get_best_result()
print(f"BEST {best.config['x']} {best.metrics[TRAINING_ITERATION]}")
events = [f for r in grid for f in os.listdir(r.path) if f.startswith("events.out.tfevents")]
print(f"TB_EVENTS {len(events)}")
