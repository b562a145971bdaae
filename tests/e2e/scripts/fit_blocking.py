"""README "In 20 lines": a 2-worker TorchTrainer.fit() that checkpoints every step."""

import os
import tempfile

import torch

from tandem import train
from tandem.train import Checkpoint, FailureConfig, RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer, prepare_model


def train_loop(config):
    model = prepare_model(torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"])
    for step in range(5):
        x = torch.randn(32, 8)
        loss = (model(x) - x.sum(1, keepdim=True)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with tempfile.TemporaryDirectory() as d:
            torch.save(model.state_dict(), f"{d}/model.pt")
            train.report({"loss": loss.item(), "step": step},
                         checkpoint=Checkpoint.from_directory(d))
    print(f"worker {train.get_context().get_world_rank()} of "
          f"{train.get_context().get_world_size()} done", flush=True)


result = TorchTrainer(train_loop, train_loop_config={"lr": 0.01},
                      scaling_config=ScalingConfig(num_workers=2),
                      run_config=RunConfig(name="readme_fit",
                                           failure_config=FailureConfig(max_failures=2))).fit()
assert result.error is None
print(f"RESULT step={result.metrics['step']} loss={result.metrics['loss']:.4f}")
print(f"CHECKPOINT {result.checkpoint.path}")
print(f"RUN {result.path}")
print(f"ROWS {len(result.metrics_dataframe)}")
assert os.path.exists(os.path.join(result.checkpoint.path, "model.pt"))
