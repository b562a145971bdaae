"""model_train: the model layer's epoch time against the same model written by hand, and
against PyTorch Lightning.

What it measures: an MLP on synthetic data (``_model_bench.py``), 2 DDP workers (gloo, one
thread each), ``epochs`` epochs, each with validation, metrics averaged across ranks, a
report and a checkpoint:

- ``tandem``: ``model.train`` of a ``TorchModel`` (the framework's loop);
- ``loop``: the same work in a hand-written ``TorchTrainer`` loop (the same batches in the
  same order, ``DistributedDataParallel``, an all-reduce of the epoch's metrics, a
  ``report`` with a checkpoint of the weights and the optimizer);
- ``lightning``: ``lightning.Trainer(strategy="ddp", devices=2, accelerator="cpu")`` with
  its usual ``DataLoader`` (Lightning adds the ``DistributedSampler``), ``self.log(...,
  sync_dist=True)``, a ``ModelCheckpoint`` every epoch and a CSV logger.

``epoch_s`` is the median time between consecutive epoch ends, the first epoch left out
(it includes the report and the checkpoint); ``process_s`` is a fresh process start to
exit; ``peak_pss_mb`` the PSS of the whole process tree.

Why: the model layer must cost nothing per epoch over the loop a user would write, and beat
Lightning's DDP start-up without a slower epoch.

Target (issue 13): epoch time ≤ 1.05× the hand-written loop; against Lightning, start to
finish faster and the epoch not slower.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cases._common import (
    Case,
    Figure,
    RunContext,
    Target,
    Variant,
    baseline_variant,
    log,
    subprocess_variant,
)

LIGHTNING_SCRIPT = Path(__file__).with_name("_lightning_ddp.py")


def _settings(params: dict[str, Any]) -> dict[str, Any]:
    return {"num_workers": int(params["workers"]), "num_epochs": int(params["epochs"]),
            "batch_size": int(params["batch_size"]), "seed": 0}


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    from benchmarks.cases._model_bench import epoch_periods, make_data, make_net
    from tandem import model
    from tandem.train import RunConfig

    # torch is imported where it runs, in the workers, as the hand-written loop's driver
    # does (importing tandem.model started torch's import where the workers fork from)
    class Net(model.TorchModel):
        def setup(self):
            self.net = make_net(self.config["params"])

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            import torch.nn.functional as F

            x, y = batch
            return F.cross_entropy(self.forward(x), y)

        def validation_step(self, batch, batch_idx):
            import torch.nn.functional as F

            x, y = batch
            logits = self.forward(x)
            return {"loss": F.cross_entropy(logits, y),
                    "accuracy": (logits.argmax(1) == y).float().mean()}

        def configure_optimizers(self):
            import torch

            return torch.optim.SGD(self.net.parameters(), lr=0.05, momentum=0.9)

    x, y, xv, yv = make_data(params)
    t0 = time.perf_counter()
    result = model.train(Net, config={"params": params},
                         dataset={"train": (x, y), "valid": (xv, yv)},
                         train_settings=_settings(params),
                         run_config=RunConfig(storage_path=workdir, name="model_train", verbose=0))
    fit_s = time.perf_counter() - t0
    times = result.metrics_dataframe["time_total_s"].tolist()
    periods = sorted(epoch_periods(times))
    log(f"model.train: epochs {periods}, fit {fit_s:.1f} s, torch in the driver: "
        f"{'torch' in sys.modules}")
    return {"epoch_s": periods[len(periods) // 2], "fit_s": fit_s,
            "val_accuracy": result.metrics["val_accuracy"]}


def hand_written_loop(config: dict[str, Any]) -> None:
    """What a user writes without the model layer, doing the same work per epoch."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    from benchmarks.cases._model_bench import make_net
    from tandem import train
    from tandem.train import Checkpoint
    from tandem.train.torch import prepare_model

    params = config["params"]
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    torch.manual_seed(0)
    net = make_net(params)
    model = prepare_model(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    x, y = config["x"], config["y"]
    per = len(x) // world
    xs = torch.from_numpy(x[rank * per:(rank + 1) * per])
    ys = torch.from_numpy(y[rank * per:(rank + 1) * per])
    xv = torch.from_numpy(config["xv"][rank::world])
    yv = torch.from_numpy(config["yv"][rank::world])
    bs = int(params["batch_size"])
    for epoch in range(1, int(params["epochs"]) + 1):
        t0 = time.perf_counter()
        model.train()
        total, n = 0.0, 0
        perm = torch.randperm(per, generator=torch.Generator().manual_seed(epoch))
        for i in range(0, per, bs):
            idx = perm[i:i + bs]
            loss = F.cross_entropy(model(xs[idx]), ys[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            n += len(idx)
        model.eval()
        vloss, vacc, vn = 0.0, 0.0, 0
        with torch.no_grad():
            for i in range(0, len(xv), bs):
                logits = net(xv[i:i + bs])
                k = len(logits)
                vloss += F.cross_entropy(logits, yv[i:i + bs]).item() * k
                vacc += (logits.argmax(1) == yv[i:i + bs]).float().mean().item() * k
                vn += k
        sums = torch.tensor([total, n, vloss, vacc, vn], dtype=torch.float64)
        dist.all_reduce(sums)
        metrics = {"epoch": epoch, "loss": float(sums[0] / sums[1]),
                   "val_loss": float(sums[2] / sums[4]), "val_accuracy": float(sums[3] / sums[4]),
                   "epoch_time_s": time.perf_counter() - t0}
        if rank == 0:
            with tempfile.TemporaryDirectory() as d:
                torch.save(net.state_dict(), os.path.join(d, "model.pt"))
                torch.save(opt.state_dict(), os.path.join(d, "optimizer.pt"))
                train.report(metrics, checkpoint=Checkpoint.from_directory(d))
        else:
            train.report(metrics)


def run_loop(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    from benchmarks.cases._model_bench import epoch_periods, make_data
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    x, y, xv, yv = make_data(params)
    t0 = time.perf_counter()
    result = TorchTrainer(
        hand_written_loop,
        train_loop_config={"params": params, "x": x, "y": y, "xv": xv, "yv": yv},
        scaling_config=ScalingConfig(num_workers=int(params["workers"])),
        run_config=RunConfig(storage_path=workdir, name="loop", verbose=0),
    ).fit()
    fit_s = time.perf_counter() - t0
    periods = sorted(epoch_periods(result.metrics_dataframe["time_total_s"].tolist()))
    log(f"loop: epochs {periods}, fit {fit_s:.1f} s")
    return {"epoch_s": periods[len(periods) // 2], "fit_s": fit_s,
            "val_accuracy": result.metrics["val_accuracy"]}


def _run_lightning(ctx: RunContext) -> dict[str, Any]:
    params = {**ctx.params, "threads": 1}
    cmd = [sys.executable, str(LIGHTNING_SCRIPT), json.dumps(params)]
    return ctx.child(None, cmd=cmd, sample_memory=True,
                     env={"OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"})


_M = __name__
CASE = Case(
    name="model_train",
    doc=__doc__ or "",
    figures=[
        Figure("epoch_s", "per-epoch time (train + validate + report + checkpoint)", "s",
               "lower", Target("<=", 1.05, "loop")),
        Figure("process_s", "whole fresh process", "s", "lower"),
        Figure("fit_s", "train call to return", "s", "lower"),
        Figure("peak_pss_mb", "peak PSS of the process tree", "MB", "lower"),
        Figure("val_accuracy", "final validation accuracy", "", "info"),
    ],
    variants=[
        subprocess_variant("tandem", "tandem", "tandem model.train", f"{_M}:run_tandem",
                           sample_memory=True, extra_requires=("torch",)),
        *baseline_variant(f"{_M}:run_tandem", sample_memory=True, extra_requires=("torch",)),
        subprocess_variant("loop", "tandem", "hand-written TorchTrainer loop", f"{_M}:run_loop",
                           sample_memory=True, extra_requires=("torch",)),
        Variant("lightning", "lightning", "Lightning Trainer(ddp, 2 CPU)", _run_lightning),
    ],
    params={"workers": 2, "epochs": 6, "batch_size": 128, "rows": 8192, "valid_rows": 1024,
            "features": 256, "hidden": 512, "classes": 10},
    smoke_params={"workers": 2, "epochs": 3, "batch_size": 64, "rows": 512, "valid_rows": 128,
                  "features": 16, "hidden": 16, "classes": 4},
    timeout_s=300,
    smoke_timeout_s=120,
)
