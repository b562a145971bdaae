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


def run_program(name: str, tmp_path, *args: str, timeout: float = 240,
                env_extra: dict[str, str] | None = None) -> str:
    env = dict(os.environ, TANDEM_STORAGE_PATH=str(tmp_path / "results"), PYTHONUNBUFFERED="1",
               **(env_extra or {}))
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


def test_mlflow_example_callback_and_setup_mlflow(tmp_path):
    """Ray's mlflow_example.py --smoke-test: its MLflow store (Ray's choice: a file store in
    the temp dir) read back through MlflowClient."""
    pytest.importorskip("mlflow")
    env = {"TMPDIR": str(tmp_path), "MLFLOW_ALLOW_FILE_STORE": "true"}
    run_program("mlflow_example.py", tmp_path, "--smoke-test", env_extra=env)
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(str(tmp_path / "mlruns"))
    for experiment, metric in (("example", "mean_loss"), ("mixin_example", "mean_loss")):
        exp = client.get_experiment_by_name(experiment)
        runs = client.search_runs([exp.experiment_id])
        assert len(runs) == 5, (experiment, [r.info.run_name for r in runs])  # num_samples=5
        for run in runs:
            assert run.info.status == "FINISHED"
            assert {"width", "height", "steps"} <= set(run.data.params)
            steps = [m.step for m in client.get_metric_history(run.info.run_id, metric)]
            # the callback logs at training_iteration 1..5; the trainable at step 0..4
            assert steps == ([1, 2, 3, 4, 5] if experiment == "example" else [0, 1, 2, 3, 4])


def test_wandb_logger_callback_docstring_example_offline(tmp_path):
    """WandbLoggerCallback's docstring example, offline: one run per trial in its folder."""
    pytest.importorskip("wandb")
    from tests.wandb_offline import offline_runs

    env = {"WANDB_MODE": "offline", "WANDB_API_KEY": "", "HOME": str(tmp_path),
           "WANDB_CONFIG_DIR": str(tmp_path / "wandb-config")}
    run_program("wandb_logger_callback.py", tmp_path, env_extra=env)
    runs = offline_runs(str(tmp_path / "results"))
    assert sorted(r.config["lr"] for r in runs) == [0.001, 0.01, 0.1, 1.0]
    for run in runs:
        assert run.project == "Optimization_Project" and run.exit_code == 0
        assert [step for step, _ in run.metric("loss")] == list(range(1, 9))  # epochs 2..9
        assert len({r.group for r in runs}) == 1
