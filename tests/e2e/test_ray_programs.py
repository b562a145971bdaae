"""Ray's own example programs, imports swapped to tandem (tests/e2e/ray_programs/), run as a
user runs them: each in its own process, on a fresh storage folder, checked by what it
prints and writes."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

PROGRAMS = os.path.join(os.path.dirname(__file__), "ray_programs")

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def run_program(name: str, tmp_path, *args: str, timeout: float = 240) -> str:
    env = dict(os.environ, TANDEM_STORAGE_PATH=str(tmp_path / "results"), PYTHONUNBUFFERED="1")
    proc = subprocess.run([sys.executable, os.path.join(PROGRAMS, name), *args], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{name} exited {proc.returncode}:\n{out[-4000:]}"
    return out


def rows(path: str) -> list[dict]:
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_tune_basic_example_with_configure_logging_false(tmp_path):
    out = run_program("tune_basic_example.py", tmp_path, "--smoke-test")
    assert "Best hyperparameters found were:" in out
    assert "'activation'" in out


def test_pbt_function_fail_fast_and_done_stop(tmp_path):
    out = run_program("pbt_function.py", tmp_path, "--smoke-test")
    assert "Best hyperparameters found were:" in out
    trials = glob.glob(str(tmp_path / "results" / "pbt_function_api_example" / "*" / "result.json"))
    assert len(trials) == 4
    for path in trials:
        its = [r["training_iteration"] for r in rows(path)]
        # stop={"done": True, "training_iteration": 10}: no trial goes past iteration 10
        assert its and max(its) <= 10, (path, its)


def test_hyperband_function_example_fail_fast(tmp_path):
    out = run_program("hyperband_function_example.py", tmp_path, "--smoke-test")
    assert "Best hyperparameters found were:" in out


def test_torch_fashion_mnist_example_enable_reproducibility(tmp_path):
    out = run_program("torch_fashion_mnist_example.py", tmp_path)
    assert "Training result: Result(metrics={'loss':" in out


def test_tuner_over_trainer_tunes_scaling_config_num_workers(tmp_path):
    out = run_program("tune_trainer_scaling_grid.py", tmp_path)
    assert "trials (lr, world_size): [(0.01, 1), (0.01, 2), (0.1, 1), (0.1, 2)]" in out


def test_tuner_restore_get_results_without_fit(tmp_path):
    run_program("tune_restore_get_results.py", tmp_path, "run")
    out = run_program("tune_restore_get_results.py", tmp_path)
    assert "Number of results: 4" in out
    assert "metrics of the trial that never reported: {}" in out
