"""A trial function that builds and fits a Trainer and forwards its reports with
TuneReportCallback; the same driver function also runs standalone."""

from tandem import train, tune
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig
from tandem.tune.integration import TuneReportCallback


def train_loop(config):
    for i in range(3):
        train.report({"loss": config["lr"] * (3 - i)})


def train_driver_fn(config):
    trainer = DataParallelTrainer(
        train_loop, train_loop_config={"lr": config["lr"]},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(name=f"inner_{config['lr']}", callbacks=[TuneReportCallback()]),
    )
    return trainer.fit()


results = tune.Tuner(
    train_driver_fn,
    param_space={"lr": tune.grid_search([0.1, 0.2, 0.3])},
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
    run_config=RunConfig(name="report_callback", verbose=0),
).fit()
print("ERRORS", results.num_errors)
print("LOSSES", sorted(round(r.metrics["loss"], 3) for r in results))
print("BEST_LR", results.get_best_result().config["lr"])
alone = train_driver_fn({"lr": 0.5})  # outside any trial: the callback does nothing
print("STANDALONE", round(alone.metrics["loss"], 3), tune.get_context().get_trial_id())
