"""A Tuner over a Trainer instance: train_loop_config and scaling_config are tunable."""

from tandem import train, tune
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig


def loop(config):
    ctx = train.get_context()
    for i in range(3):
        train.report({"loss": config["lr"] * (3 - i), "world": ctx.get_world_size(),
                      "trial": ctx.get_trial_name() or "none"})


trainer = DataParallelTrainer(loop, train_loop_config={"lr": 1.0},
                              scaling_config=ScalingConfig(num_workers=1))
results = tune.Tuner(
    trainer,
    param_space={"train_loop_config": {"lr": tune.grid_search([0.1, 0.2])},
                 "scaling_config": ScalingConfig(num_workers=2)},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=RunConfig(name="tuner_trainer", verbose=0),
).fit()
print("ERRORS", results.num_errors)
print("LOSSES", sorted(round(r.metrics["loss"], 3) for r in results))
print("WORLDS", sorted(r.metrics["world"] for r in results))
print("IN_TRIAL", all(r.metrics["trial"] != "none" for r in results))
print("BEST_LR", results.get_best_result().config["train_loop_config"]["lr"])
