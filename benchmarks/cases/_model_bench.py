"""The model and data of ``model_train``, shared by every variant (tandem's model.train,
a hand-written TorchTrainer loop, PyTorch Lightning).

Synthetic classification: ``rows`` x ``features`` standard-normal inputs, labels from a
fixed random linear map; an MLP ``features-hidden-hidden-classes``; SGD with momentum;
``batch_size`` per worker; a validation set of ``valid_rows``; a checkpoint every epoch.
"""

from __future__ import annotations

import itertools
from typing import Any


def make_data(params: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    import numpy as np

    rng = np.random.default_rng(0)
    f, c = int(params["features"]), int(params["classes"])
    w = rng.normal(size=(f, c))
    x = rng.normal(size=(int(params["rows"]) + int(params["valid_rows"]), f)).astype(np.float32)
    y = (x @ w).argmax(1).astype(np.int64)
    n = int(params["rows"])
    return x[:n], y[:n], x[n:], y[n:]


def make_net(params: dict[str, Any]) -> Any:
    from torch import nn

    f, h, c = int(params["features"]), int(params["hidden"]), int(params["classes"])
    return nn.Sequential(nn.Linear(f, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, c))


def make_optimizer(params: Any) -> Any:
    import torch

    return lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9)


def epoch_periods(times: list[float]) -> list[float]:
    """Seconds between consecutive epoch ends: epochs 2..N (the first, with warm-up, is out)."""
    return [b - a for a, b in itertools.pairwise(times)]
