"""As a user would: train -> register -> serve (examples/model_serve.py), then the CLI
(`tandem models list|show`, `tandem serve` in the foreground, stopped with SIGTERM)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import httpx
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.slow


@pytest.mark.timeout(300)
def test_train_register_serve_then_the_cli(tmp_path):
    env = {**os.environ, "HOME": str(tmp_path), "TANDEM_STORAGE_PATH": str(tmp_path / "runs")}
    for key in ("TANDEM_ADDRESS", "TANDEM_MODELS_PATH", "TANDEM_MODELS_STORAGE"):
        env.pop(key, None)
    r = subprocess.run([sys.executable, os.path.join(ROOT, "examples", "model_serve.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240,
                       check=False)
    assert r.returncode == 0, r.stderr
    assert "registered digits@1 (val_acc " in r.stdout
    predicted = json.loads(r.stdout.split("predicted ")[1].splitlines()[0])
    true = json.loads(r.stdout.split("true      ")[1].splitlines()[0])
    assert sum(p == t for p, t in zip(predicted, true)) >= 7  # a trained model answered

    def tandem(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tandem.cli", *args], env=env,
                              capture_output=True, text=True, timeout=60, check=False)

    r = tandem("models", "list")
    assert r.returncode == 0 and "digits  versions=1  latest=1" in r.stdout
    assert os.path.exists(tmp_path / ".tandem" / "models" / "registry.db")
    r = tandem("models", "show", "digits", "--json")
    record = json.loads(r.stdout)
    assert record["lineage"]["run_path"].startswith(str(tmp_path / "runs"))
    assert record["metrics"]["epoch"] == 5 and "val_acc" in record["metrics"]
    assert tandem("models", "alias", "digits", "prod", "1").returncode == 0

    proc = subprocess.Popen([sys.executable, "-m", "tandem.cli", "serve", "digits@prod",
                             "--port", "0", "--max-batch-size", "8"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first.startswith("serving digits@prod at http://127.0.0.1:"), (
            first + proc.stderr.read() if proc.poll() is not None else first)
        url = first.split(" at ")[1].split()[0]
        info = httpx.get(url, timeout=30).json()
        assert (info["name"], info["version"], info["max_batch_size"]) == ("digits", 1, 8)
        out = httpx.post(url + "/predict", json={"inputs": [[0.0] * 64]}, timeout=30).json()
        assert len(out["outputs"][0]) == 10
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(url, timeout=1)
            except httpx.ConnectError:
                break
            time.sleep(0.05)
        else:
            raise AssertionError("the port still answers after `tandem serve` stopped")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
