"""The 1.x Trainer: start, run, run_iterator (resuming from latest_checkpoint), shutdown,
and to_worker_group."""

import os
import sys

from tandem import train
from tandem.train import Trainer


def train_func(config):
    state = train.load_checkpoint()
    start = state["epoch"] + 1 if state else 0
    for epoch in range(start, config["epochs"]):
        train.report(epoch=epoch, loss=1.0 / (epoch + 1))
        train.save_checkpoint(epoch=epoch)
    return train.world_rank()


trainer = Trainer(backend="torch", num_workers=2, logdir=os.path.join(sys.argv[1], "legacy"))
trainer.start()
print("RUN", trainer.run(train_func, config={"epochs": 2}))
print("LATEST", trainer.latest_checkpoint["epoch"])
epochs = []
for results in trainer.run_iterator(train_func, config={"epochs": 4},
                                    checkpoint=trainer.latest_checkpoint):
    assert len(results) == 2  # one dict per worker
    epochs.append(results[0]["epoch"])
print("ITERATOR_EPOCHS", epochs)
trainer.shutdown()


class Worker:
    def __init__(self, base):
        self.base = base

    def rank_plus_base(self):
        return train.world_rank() + self.base

    def world(self):
        import torch.distributed as dist

        return dist.get_world_size()


group = Trainer(backend="torch", num_workers=2).to_worker_group(Worker, 10)
print("GROUP", len(group), group.execute("rank_plus_base"), group.execute("world"))
group.shutdown()
