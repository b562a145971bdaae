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


def _iterations(exp: str) -> list[list[int]]:
    """Each trial's training_iteration column, in trial order."""
    paths = sorted(glob.glob(os.path.join(exp, "*", "result.json")))
    return [[r["training_iteration"] for r in rows(p)] for p in paths]


def test_async_hyperband_example_stops_trials_at_rungs(tmp_path):
    out = run_program("async_hyperband_example.py", tmp_path)
    assert "Best hyperparameters found:" in out
    its = _iterations(str(tmp_path / "results" / "asynchyperband_test"))
    assert len(its) == 8
    assert all(i == list(range(1, len(i) + 1)) for i in its), its  # no gap, no duplicate
    ends = sorted(i[-1] for i in its)
    assert ends[-1] == 20 and ends[0] < 20, ends  # max_t=20; ASHA stopped some early
    assert set(ends) <= {3, 12, 20}, ends  # rungs at grace_period * 4**k (Ray's eta), max_t


def test_hyperband_example_halves_its_bracket_as_ray(tmp_path):
    """MyTrainableClass (a class Trainable) under HyperBand, max_t=27, 9 trials: bracket
    (4 trials, 27) runs straight to 27; bracket (6 slots, milestone 9) keeps ceil(6/3) = 2
    and runs them on to 27, as Ray 2.60 does on the same program (6 trials at 27, 3 at 9).
    Before: every trial ran to 27 (the bracket was never halved)."""
    out = run_program("hyperband_example.py", tmp_path)
    assert "Best hyperparameters found were:" in out
    its = _iterations(str(tmp_path / "results" / "hyperband_test"))
    assert sorted(i[-1] for i in its) == [9, 9, 9] + [27] * 6
    assert all(i == list(range(1, len(i) + 1)) for i in its), its  # paused, resumed, no repeat
    assert "PAUSED" in out


def test_pbt_example_class_api_finishes(tmp_path):
    """Ray's pbt_example.py (class Trainable with reset_config, checkpoint_frequency, PBT
    pausing 4 trials on 2 CPUs): it hung, a trial paused for good."""
    out = run_program("pbt_example.py", tmp_path, "--smoke-test", timeout=120)
    assert "Best hyperparameters found were:" in out
    its = _iterations(str(tmp_path / "results" / "pbt_class_api_example"))
    assert its == [list(range(1, 11))] * 4  # stop at 10, exactly


def test_optuna_example_with_concurrency_limiter(tmp_path):
    out = run_program("optuna_example.py", tmp_path, "--smoke-test")
    assert "Best hyperparameters found were:" in out
    (exp,) = glob.glob(str(tmp_path / "results" / "easy_objective_*"))
    its = _iterations(exp)
    assert len(its) == 10 and all(1 <= len(i) <= 20 for i in its)


def test_stoppers_as_ray(tmp_path):
    """The same program on Ray 2.60 prints these lines."""
    out = run_program("tune_stoppers.py", tmp_path)
    expected = {
        "DICT": "[8]", "FUNCTION": "[8]", "CUSTOM_AT_MOST_8": "True", "TRIAL_PLATEAU": "[13]",
        "MAX_ITER": "[5, 5]", "COMBINED": "[15]", "EXPERIMENT_PLATEAU": "[19]",
    }
    got = dict(line.split(" ", 1) for line in out.splitlines()
               if line.split(" ", 1)[0] in expected)
    assert got == expected, out[-3000:]


def test_torch_linear_example_prepare_model_and_data_loader(tmp_path):
    """TorchTrainer with prepare_model / prepare_data_loader on 2 workers, a checkpoint per
    epoch (Ray Train's torch_linear_example.py)."""
    out = run_program("torch_linear_example.py", tmp_path, "--smoke-test")
    (run,) = glob.glob(str(tmp_path / "results" / "TorchTrainer_*"))
    assert [r["training_iteration"] for r in rows(os.path.join(run, "result.json"))] == [1, 2, 3]
    assert sorted(os.path.basename(p) for p in glob.glob(os.path.join(run, "checkpoint_*"))) \
        == ["checkpoint_000001", "checkpoint_000002", "checkpoint_000003"]
    assert "{'loss': " in out


def test_custom_func_checkpointing(tmp_path):
    """Checkpoints from a function trainable; the best result's checkpoint is its last one
    (stop at 10), inside its own trial folder."""
    out = run_program("custom_func_checkpointing.py", tmp_path)
    exp = tmp_path / "results" / "hyperband_test"
    assert _iterations(str(exp)) == [list(range(1, 11))] * 5
    best = [ln for ln in out.splitlines() if ln.startswith("Best checkpoint:")]
    assert best and f"{exp}/train_func_" in best[0] and "checkpoint_000010" in best[0]


def test_logging_example_trial_name_and_dirname_creators(tmp_path):
    out = run_program("logging_example.py", tmp_path, "--smoke-test")
    assert "Best hyperparameters: " in out
    # trial_name_creator names each trial ("<trainable>_<trial_id>_123") where Ray prints it,
    # and trial_dirname_creator names its folder
    named = [line for line in out.splitlines() if line.startswith("TestLogger for trial ")]
    assert len(named) == 5, out[-3000:]
    names = {line.split()[3].rstrip(":") for line in named}
    assert len(names) == 5 and all(n.startswith("easy_objective_") and n.endswith("_123")
                                   for n in names)
    folders = {os.path.basename(os.path.dirname(p)) for p in glob.glob(
        str(tmp_path / "results" / "hyperband_test" / "*" / "result.json"))}
    assert folders == names


def test_lightning_quickstart(tmp_path):
    """Ray Train's Lightning quickstart (RayDDPStrategy, RayLightningEnvironment,
    RayTrainReportCallback, prepare_trainer) on 2 workers."""
    pytest.importorskip("lightning")
    out = run_program("lightning_quickstart.py", tmp_path)
    assert "metrics: ['epoch', 'loss', 'step'] epoch: 1" in out
    assert "checkpoint files: ['checkpoint.ckpt']" in out


def test_transformers_torch_trainer_basic(tmp_path):
    """Ray Train's transformers example (RayTrainReportCallback, prepare_trainer) with a
    real transformers.Trainer on 2 workers; the model is built from a config."""
    pytest.importorskip("transformers")
    pytest.importorskip("datasets")
    out = run_program("transformers_torch_trainer_basic.py", tmp_path)
    assert "True epoch: 2.0" in out
    assert "checkpoint files: ['checkpoint']" in out


def test_tensorflow_mnist_example_multiworker_keras_fit(tmp_path):
    """Ray's tensorflow_mnist_example.py --smoke-test: 2 workers in one
    MultiWorkerMirroredStrategy (TF_CONFIG from tandem), Keras' fit with
    ReportCheckpointCallback; one report and one checkpoint per epoch."""
    import importlib.util

    if importlib.util.find_spec("tf_keras") is None:
        pytest.skip("needs the tensorflow extra and tf-keras")
    out = run_program("tensorflow_mnist_example.py", tmp_path, "--smoke-test",
                      env_extra={"HOME": str(tmp_path)})
    assert "Final metrics: {" in out and "'accuracy':" in out
    (run,) = glob.glob(str(tmp_path / "results" / "*" / "result.json"))
    assert [r["training_iteration"] for r in rows(run)] == [1, 2]
    ckpts = sorted(glob.glob(os.path.join(os.path.dirname(run), "checkpoint_*", "model.keras")))
    assert len(ckpts) >= 1
