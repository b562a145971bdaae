"""model.train(block=False) on the train server from a process that exits; a second
process picks the result up and predicts with the trained model."""

from __future__ import annotations

import pytest

from tests.integration.server.conftest import run_client

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SUBMIT = """
import sys
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from tandem import model
from tandem.train import RunConfig

class Digits(model.TorchModel):          # defined in this script: it travels by value
    default_config = {"lr": 0.01}
    def setup(self):
        self.net = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                       torch.nn.Linear(32, 10))
    def forward(self, x):
        return self.net(x)
    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.forward(x), y)
    def validation_step(self, batch, batch_idx):
        x, y = batch
        return {"accuracy": (self.forward(x).argmax(1) == y).float().mean()}

X, y = load_digits(return_X_y=True)
X = X / 16.0
handle = model.train(Digits, dataset={"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])},
                     train_settings={"num_workers": 2, "num_epochs": 4},
                     run_config=RunConfig(storage_path=sys.argv[1]), block=False)
print(type(handle).__name__, handle.status())
print(handle.job_id)
"""

FETCH = """
import sys
import tandem.jobs
from sklearn.datasets import load_digits
from tandem import model

result = model.ModelResult.from_result(tandem.jobs.get(sys.argv[1]).wait(timeout=150))
X, y = load_digits(return_X_y=True)
m = result.model
acc = float((m.predict(X[1400:] / 16.0).argmax(1).numpy() == y[1400:]).mean())
print(type(m).__name__, result.metrics["epoch"], acc, result.metrics["val_accuracy"])
"""


def test_train_block_false_from_a_process_that_exits(server, tmp_path):
    out = run_client(server, SUBMIT, str(tmp_path), str(tmp_path / "results"))
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[0].split()[0] == "ModelJobHandle"
    job_id = lines[-1]
    assert job_id.startswith("job_")
    fetched = run_client(server, FETCH, str(tmp_path), job_id, timeout=200)
    assert fetched.returncode == 0, fetched.stderr[-3000:]
    name, epoch, acc, val_acc = fetched.stdout.split()
    assert (name, epoch) == ("Digits", "4")
    assert float(acc) == pytest.approx(float(val_acc), abs=1e-6) and float(acc) > 0.85
