# Ported from the example in Ray's python/ray/air/integrations/wandb.py, WandbLoggerCallback's
# docstring (Apache-2.0, ray-project/ray): Ray's text with the imports swapped to tandem. Ray's
# docstring calls train.report without importing train; the import is added here. Run it with
# WANDB_MODE=offline to log without an account (each trial's run lands in its trial folder).
import random

from tandem import train, tune
from tandem.air.integrations.wandb import WandbLoggerCallback


def train_func(config):
    offset = random.random() / 5
    for epoch in range(2, config["epochs"]):
        acc = 1 - (2 + config["lr"]) ** -epoch - random.random() / epoch - offset
        loss = (2 + config["lr"]) ** -epoch + random.random() / epoch + offset
        train.report({"acc": acc, "loss": loss})


tuner = tune.Tuner(
    train_func,
    param_space={
        "lr": tune.grid_search([0.001, 0.01, 0.1, 1.0]),
        "epochs": 10,
    },
    run_config=tune.RunConfig(
        callbacks=[WandbLoggerCallback(project="Optimization_Project")]
    ),
)
results = tuner.fit()
