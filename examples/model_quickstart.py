"""The model object: write a model once, train it on 2 DDP workers, predict, tune it.

    pip install -e ".[torch,server]"   # torch to train; the server extra to serve
    python examples/model_quickstart.py [--epochs 6] [--samples 6]

Seed 000's flow on scikit-learn's digits: a model class (setup, forward, training and
validation steps, its own hyperparameter space) and a data class whose setup() runs on
each worker; train on 2 workers without blocking, wait, predict with the trained model,
then tune it with ASHA, every trial a model.train job; register the best model in the
model registry and serve it over HTTP.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import tandem
from tandem import model, tune
from tandem.train import RunConfig
from tandem.tune.schedulers import ASHAScheduler


class DigitsMLP(model.TorchModel):
    default_config = {"hidden": 64, "lr": 3e-3, "dropout": 0.1}  # noqa: RUF012

    def setup(self):
        h = self.config["hidden"]
        self.net = torch.nn.Sequential(
            torch.nn.Linear(64, h), torch.nn.ReLU(), torch.nn.Dropout(self.config["dropout"]),
            torch.nn.Linear(h, 10))

    def forward(self, x):
        return self.net(x)

    def postprocess(self, logits):
        return logits.argmax(dim=1)  # predict() answers with the digit

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.forward(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.forward(x)
        return {"loss": F.cross_entropy(logits, y),
                "accuracy": (logits.argmax(1) == y).float().mean()}

    @classmethod
    def hyperparameter_space(cls):
        return {"lr": tune.loguniform(1e-4, 3e-2), "hidden": tune.choice([32, 64, 128])}


class DigitsData:
    """Runs on each worker: returns the splits (each worker trains on its own shard)."""

    def __init__(self, config):
        self.config = config

    def setup(self):
        from sklearn.datasets import load_digits

        X, y = load_digits(return_X_y=True)
        X = X / 16.0
        return {"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--samples", type=int, default=6)
    parser.add_argument("--storage", default=None)
    args = parser.parse_args()
    # it serves the best model at the end: say now, not after training, if serving can't run
    tandem.require_extras("torch", "server", what="examples/model_quickstart.py")
    settings = {"num_workers": 2, "num_epochs": args.epochs, "batch_size": 32}

    # 1. train on 2 DDP workers; block=False returns a handle at once
    handle = model.train(DigitsMLP, dataset=DigitsData, train_settings=settings,
                         block=False, run_config=RunConfig(storage_path=args.storage))
    print(f"submitted {handle.job_id}: {handle.status()}")
    result = handle.wait()

    # 2. the result holds the trained model
    from sklearn.datasets import load_digits

    X, y = load_digits(return_X_y=True)
    predicted = result.model.predict(X[1400:] / 16.0)
    accuracy = (predicted.numpy() == y[1400:]).mean()
    print(f"trained: val_accuracy {result.metrics['val_accuracy']:.3f}, "
          f"predict() accuracy {accuracy:.3f}; checkpoint {result.checkpoint.path}")

    # 3. tune over DigitsMLP.hyperparameter_space(); ASHA stops poor trials after an epoch
    grid = model.tune(
        DigitsMLP, dataset=DigitsData,
        train_settings={**settings, "num_workers": 1},
        tune_settings={"num_samples": args.samples, "metric": "val_accuracy", "mode": "max",
                       "scheduler": ASHAScheduler(max_t=args.epochs, grace_period=1,
                                                   reduction_factor=2)},
        run_config=RunConfig(storage_path=args.storage),
    )
    best = grid.get_best_result()
    print(f"best config: lr={best.config['lr']:.4g} hidden={best.config['hidden']} "
          f"val_accuracy {best.metrics['val_accuracy']:.3f} after {best.metrics['epoch']} epochs")
    print(f"best model predicts: {best.model.predict(X[:5] / 16.0).tolist()} "
          f"(true: {y[:5].tolist()})")

    # 4. register the best model (a new version of "digits"), then serve it over HTTP
    import httpx

    ref = model.put(best, name="digits")
    with model.serve(ref, serve_settings={"max_batch_size": 32, "batch_wait_ms": 2}) as served:
        answer = httpx.post(served.url + "/predict", json={"inputs": (X[:5] / 16.0).tolist()})
        print(f"registered {ref}; served at {served.url}: {answer.json()['outputs']}")


if __name__ == "__main__":
    main()
