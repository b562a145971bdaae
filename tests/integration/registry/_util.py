"""Helpers for the registry and serving tests: a small digits MLP defined in a script (so
its class exists only in ``__main__`` of the process that registers it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from typing import Any

import pytest

MODEL_SRC = '''
import numpy as np
from tandem.model import TorchModel


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
                       text=True, timeout=timeout, check=False)
    return r


def check(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 0, f"exit {r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    return r.stdout


def models_namespace(module: str, extra: str = "") -> dict[str, Any]:
    """``MODEL_SRC`` (and ``extra`` after it) run as a module that exists only in memory,
    named ``module``: its classes cannot be imported by name, as with a script's."""
    ns: dict[str, Any] = {"__name__": module}
    exec(compile(MODEL_SRC + extra, module, "exec"), ns)  # noqa: S102 - a module in memory
    return ns


def put_digits(tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch, module: str,
               seeds: tuple[int, ...] = (5,)) -> tuple[list[tuple[Any, Any]], dict[str, Any]]:
    """Registers one ``DigitsMLP`` version per seed, as ``digits``, in a local registry
    under ``tmp_path`` (no server, no other storage). Returns ``[(ref, model), ...]`` and
    the models' namespace (``ns["digits"](n)``: n rows to predict)."""
    from tandem import model

    monkeypatch.setenv("TANDEM_MODELS_PATH", os.path.join(os.fspath(tmp_path), "models"))
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    ns = models_namespace(module)
    versions = []
    for seed in seeds:
        m = ns["DigitsMLP"]({"seed": seed})
        m.ensure_setup()
        versions.append((model.put(m, name="digits"), m))
    return versions, ns


def predict(handle: Any, X: Any) -> Any:
    """The outputs a served model answers for ``X`` (one POST /predict), as an array."""
    import httpx
    import numpy as np

    r = httpx.post(handle.url + "/predict", json={"inputs": X.tolist()}, timeout=30)
    assert r.status_code == 200, r.text
    return np.array(r.json()["outputs"])
