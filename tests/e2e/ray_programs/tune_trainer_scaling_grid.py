# A Ray Train + Tune program in the form Ray's user guide gives it ("Hyperparameter tuning
# with Ray Tune": a TorchTrainer passed to a Tuner, whose param_space tunes the train loop
# config and the ScalingConfig itself, `num_workers=tune.grid_search([1, 2])`). Only the
# imports differ from Ray's: `ray.train` -> `tandem.train`, `ray.tune` -> `tandem.tune`.
import torch
from torch import nn

import tandem.train as train
from tandem import tune
from tandem.train import ScalingConfig
from tandem.train.torch import TorchTrainer
from tandem.tune import Tuner


def train_loop_per_worker(config):
    torch.manual_seed(0)
    x = torch.randn(64, 4)
    y = x.sum(dim=1, keepdim=True)
    model = train.torch.prepare_model(nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for _ in range(config["epochs"]):
        loss = nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        train.report({"loss": loss.item(),
                      "world_size": train.get_context().get_world_size()})


trainer = TorchTrainer(
    train_loop_per_worker,
    train_loop_config={"epochs": 2},
    scaling_config=ScalingConfig(num_workers=2),
)
tuner = Tuner(
    trainer,
    param_space={
        "train_loop_config": {"lr": tune.grid_search([0.01, 0.1])},
        "scaling_config": ScalingConfig(num_workers=tune.grid_search([1, 2])),
    },
    tune_config=tune.TuneConfig(metric="loss", mode="min"),
)
results = tuner.fit()
assert not results.errors, results.errors
seen = sorted((r.config["train_loop_config"]["lr"], r.metrics["world_size"]) for r in results)
print("trials (lr, world_size):", seen)
assert seen == [(0.01, 1), (0.01, 2), (0.1, 1), (0.1, 2)], seen
print("Best config:", results.get_best_result().config)
