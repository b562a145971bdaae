"""The 1.x Trainer inside tuning: trainer.to_tune_trainable(fn) under tune.run."""

from tandem import train, tune
from tandem.train import Trainer


def train_func(config):
    for i in range(3):
        train.report(loss=config["lr"] * (3 - i))
    return train.world_rank()


trainer = Trainer(backend="torch", num_workers=2)
trainable = trainer.to_tune_trainable(train_func)
analysis = tune.run(trainable, config={"lr": tune.grid_search([0.1, 0.2])}, metric="loss",
                    mode="min", name="legacy_to_tune", verbose=0)
print("BEST", analysis.get_best_config(metric="loss", mode="min"))
print("LOSSES", sorted(round(t.last_result["loss"], 3) for t in analysis.trials))
