"""model.train / Model.load as a user runs them: a script in its own process, public API
only, its console output read as a person would (piped: one line per epoch)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SCRIPT = textwrap.dedent("""
    import sys
    import torch
    import torch.nn.functional as F
    from sklearn.datasets import load_digits
    from tandem import model

    class Digits(model.TorchModel):
        default_config = {"hidden": 32, "lr": 0.01}
        def setup(self):
            self.net = torch.nn.Sequential(torch.nn.Linear(64, self.config["hidden"]),
                                           torch.nn.ReLU(), torch.nn.Linear(self.config["hidden"], 10))
        def forward(self, x):
            return self.net(x)
        def postprocess(self, logits):
            return logits.argmax(1)
        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.forward(x), y)
        def validation_step(self, batch, batch_idx):
            x, y = batch
            return {"accuracy": (self.forward(x).argmax(1) == y).float().mean()}

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    handle = model.train(Digits, dataset={"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])},
                         train_settings={"num_workers": 2, "num_epochs": 3}, block=False)
    result = handle.wait()
    result.model.save(sys.argv[1])
    print("RESULT", result.metrics["epoch"], round(result.metrics["val_accuracy"], 6))
""")

LOAD = textwrap.dedent("""
    import sys
    from sklearn.datasets import load_digits
    from tandem import model
    m = model.Model.load(sys.argv[1])
    X, y = load_digits(return_X_y=True)
    print("LOADED", type(m).__name__, round(float((m.predict(X[1400:] / 16.0).numpy() == y[1400:]).mean()), 6))
""")


def test_train_wait_save_then_load_elsewhere(tmp_path):
    env = {**os.environ, "TANDEM_STORAGE_PATH": str(tmp_path / "results")}
    env.pop("TANDEM_ADDRESS", None)
    (tmp_path / "train_it.py").write_text(SCRIPT)
    saved = str(tmp_path / "saved")
    proc = subprocess.run([sys.executable, "train_it.py", saved], check=False, cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("tandem: run Digits_") and "started on 2 workers" in lines[0]
    epochs = [ln for ln in lines if "] epoch " in ln]
    assert [ln.split("] epoch ")[1].split()[0] for ln in epochs] == ["1/3", "2/3", "3/3"]
    assert "val_accuracy=" in epochs[-1]
    assert any(ln.startswith("tandem: run Digits_") and "finished after" in ln for ln in lines)
    _, epoch, acc = next(ln for ln in lines if ln.startswith("RESULT")).split()
    assert epoch == "3"
    # another process, another folder, without the script: the class came with the weights
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "load_it.py").write_text(LOAD)
    out = subprocess.run([sys.executable, "load_it.py", saved], check=False,
                         cwd=tmp_path / "elsewhere",
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["LOADED", "Digits", acc]
