"""Helpers for the registry and serving tests: a small digits MLP defined in a script (so
its class exists only in ``__main__`` of the process that registers it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

MODEL_SRC = '''
import numpy as np
from tandem.model._model import TorchModel


class DigitsMLP(TorchModel):
    default_config = {"hidden": 32, "seed": 0}
    example_input = np.zeros((1, 64), dtype=np.float32)

    def setup(self):
        import torch

        torch.manual_seed(self.config["seed"])
        self.net = torch.nn.Sequential(torch.nn.Linear(64, self.config["hidden"]),
                                       torch.nn.ReLU(), torch.nn.Linear(self.config["hidden"], 10))

    def forward(self, x):
        return self.net(x)


def digits(n=200):
    from sklearn.datasets import load_digits

    X = load_digits().data.astype("float32") / 16.0
    return X[:n]
'''


def run_script(code: str, cwd: str, env: dict[str, str] | None = None,
               timeout: float = 90) -> subprocess.CompletedProcess:
    """Runs ``code`` as ``__main__`` of a fresh interpreter; fails the test on a non-zero exit."""
    path = os.path.join(cwd, f"script_{abs(hash(code)) % 10**8}.py")
    with open(path, "w") as f:
        f.write(textwrap.dedent(code))
    full_env = {**os.environ, **(env or {})}
    r = subprocess.run([sys.executable, path], cwd=cwd, env=full_env, capture_output=True,
                       text=True, timeout=timeout)
    return r


def check(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout
