"""PyTorch Lightning on the ``model_train`` model and data:
``Trainer(strategy="ddp", devices=2, accelerator="cpu")``, validation and a checkpoint
every epoch. Run as a script (Lightning's DDP launcher re-runs it once per extra rank);
rank 0 writes the figures as JSON to ``$BENCH_RESULT_FILE``."""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> None:
    import lightning as L
    import torch
    import torch.nn.functional as F
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    from benchmarks.cases._common import write_json
    from benchmarks.cases._model_bench import epoch_periods, make_data, make_net

    t_start = time.perf_counter()
    params = json.loads(sys.argv[1])
    torch.set_num_threads(int(params["threads"]))  # the same threads per worker as tandem
    workdir = os.environ.get("BENCH_WORKDIR", ".")
    x, y, xv, yv = make_data(params)

    class Module(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = make_net(params)

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            xb, yb = batch
            loss = F.cross_entropy(self(xb), yb)
            self.log("loss", loss, on_step=False, on_epoch=True, sync_dist=True)
            return loss

        def validation_step(self, batch, batch_idx):
            xb, yb = batch
            logits = self(xb)
            self.log("val_loss", F.cross_entropy(logits, yb), sync_dist=True)
            self.log("val_accuracy", (logits.argmax(1) == yb).float().mean(), sync_dist=True)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9)

    ends: list[float] = []

    class Clock(Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            ends.append(time.perf_counter())

    bs = int(params["batch_size"])
    train = DataLoader(TensorDataset(torch.from_numpy(x), torch.from_numpy(y)), batch_size=bs,
                       shuffle=True)
    valid = DataLoader(TensorDataset(torch.from_numpy(xv), torch.from_numpy(yv)), batch_size=bs)
    trainer = L.Trainer(
        strategy="ddp", devices=int(params["workers"]), accelerator="cpu",
        max_epochs=int(params["epochs"]), logger=CSVLogger(workdir),
        callbacks=[Clock(), ModelCheckpoint(dirpath=os.path.join(workdir, "ckpt"),
                                            every_n_epochs=1, save_top_k=-1)],
        enable_progress_bar=False, enable_model_summary=False, default_root_dir=workdir,
    )
    t_fit = time.perf_counter()
    trainer.fit(Module(), train, valid)
    fit_s = time.perf_counter() - t_fit
    if trainer.global_rank == 0 and os.environ.get("BENCH_RESULT_FILE"):
        periods = sorted(epoch_periods(ends))
        write_json(os.environ["BENCH_RESULT_FILE"], {
            "epoch_s": periods[len(periods) // 2],
            "fit_s": fit_s,
            "script_s": time.perf_counter() - t_start,
            "val_accuracy": float(trainer.callback_metrics["val_accuracy"]),
            "torch_threads": torch.get_num_threads(),
        })


if __name__ == "__main__":
    main()
