"""Train a model, register it, serve it: the three lines at the bottom.

    pip install -e ".[torch,server]"   # torch to train; the server extra to serve
    python examples/model_serve.py

Trains a small MLP on scikit-learn's digits (one worker, a few epochs), registers the
result in the model registry (a local one under ~/.tandem/models, or the train server's
when TANDEM_ADDRESS is set), serves it over HTTP with dynamic batching and asks it for
a few predictions.
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits

import tandem
from tandem import model


class DigitsMLP(model.TorchModel):
    default_config = {"hidden": 64, "lr": 1e-2}
    example_input = np.zeros((1, 64), dtype=np.float32)  # put checks predict() on it

    def setup(self):
        h = self.config["hidden"]
        self.net = torch.nn.Sequential(torch.nn.Linear(64, h), torch.nn.ReLU(),
                                       torch.nn.Linear(h, 10))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.cross_entropy(self.net(x), y.long())

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return {"acc": (self.net(x).argmax(1) == y).float().mean().item()}


def main() -> None:
    tandem.require_extras("torch", "server", what="examples/model_serve.py")  # before training
    import httpx

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype("float32")
    data = {"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])}

    result = model.train(DigitsMLP, dataset=data, train_settings={"num_epochs": 5})
    ref = model.put(result, name="digits")
    handle = model.serve(ref, serve_settings={"max_batch_size": 32, "batch_wait_ms": 2})

    print(f"registered {ref} (val_acc {result.metrics['val_acc']:.3f}); serving at {handle.url}")
    r = httpx.post(handle.url + "/predict", json={"inputs": X[1400:1410].tolist()})
    predicted = np.argmax(r.json()["outputs"], axis=1)
    print(f"predicted {predicted.tolist()}")
    print(f"true      {y[1400:1410].tolist()}")
    handle.stop()


if __name__ == "__main__":
    main()
