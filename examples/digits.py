"""An MLP on scikit-learn's bundled digits data (8x8 images, 10 classes; no download).

``train_loop`` is a plain PyTorch DDP loop: each worker trains on its shard, gradients
are all-reduced by DistributedDataParallel, rank 0 saves a checkpoint every epoch.
"""

from __future__ import annotations

import os
import tempfile

import torch
from torch import nn

from tandem import train
from tandem.train.torch import prepare_data_loader, prepare_model


def load_digits_tensors(seed: int = 0):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype("float32")
    x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.25, random_state=seed, stratify=y)
    as_t = torch.from_numpy
    return (as_t(x_tr), as_t(y_tr).long()), (as_t(x_te), as_t(y_te).long())


def train_loop(config: dict) -> None:
    torch.manual_seed(config.get("seed", 0))
    (x_tr, y_tr), (x_te, y_te) = load_digits_tensors()
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_tr, y_tr), batch_size=config.get("batch_size", 64),
        shuffle=True)
    loader = prepare_data_loader(loader)  # each rank gets its own part of the data
    hidden = config.get("hidden", 64)
    model = prepare_model(nn.Sequential(nn.Linear(64, hidden), nn.ReLU(), nn.Linear(hidden, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=config["lr"], momentum=config.get("momentum", 0.9))

    start = 0
    checkpoint = train.get_checkpoint()
    if checkpoint is not None:  # resuming after a failure (or a PBT exploit)
        with checkpoint.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"))
        (model.module if hasattr(model, "module") else model).load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        start = state["epoch"] + 1

    for epoch in range(start, config.get("epochs", 10)):
        if hasattr(loader.sampler, "set_epoch"):
            loader.sampler.set_epoch(epoch)
        model.train()
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            logits = model(x_te)
            loss = nn.functional.cross_entropy(logits, y_te).item()
            accuracy = (logits.argmax(1) == y_te).float().mean().item()
        with tempfile.TemporaryDirectory() as d:  # report() copies it into the run folder
            ckpt = None
            if train.get_context().get_world_rank() == 0:
                inner = model.module if hasattr(model, "module") else model
                torch.save({"model": inner.state_dict(), "opt": opt.state_dict(),
                            "epoch": epoch}, os.path.join(d, "state.pt"))
                ckpt = train.Checkpoint.from_directory(d)
            train.report({"epoch": epoch, "loss": loss, "accuracy": accuracy}, checkpoint=ckpt)
