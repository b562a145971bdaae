"""tandem on a running Ray cluster (docs/ray.md): tandem.init(cluster="ray"), a 2-worker
fit whose workers are Ray actors, then a Tuner whose trials run there too."""

import os
import sys

import tandem
from tandem import train, tune
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

tandem.init(cluster="ray", ray_address=sys.argv[1])


def loop(config):
    import ray

    ctx = train.get_context()
    train.report({"rank_pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                  "world": ctx.get_world_size(), "loss": config["lr"]})


result = DataParallelTrainer(loop, train_loop_config={"lr": 0.1},
                             scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(name="on_ray")).fit()
print("FIT", result.metrics["world"], result.metrics["rank_pid"] != os.getpid(),
      len(result.metrics["node"]) > 0)

grid = tune.Tuner(
    DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=1)),
    param_space={"train_loop_config": {"lr": tune.grid_search([0.3, 0.2])}},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=RunConfig(name="tune_on_ray", verbose=0),
).fit()
print("TUNE", grid.num_errors, grid.get_best_result().config["train_loop_config"]["lr"])
tandem.shutdown()
