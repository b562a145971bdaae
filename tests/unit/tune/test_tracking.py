"""Bad input to the tracking integrations (issue 17, item 6) is refused with a message that
says what was given and what to do, before any trial starts."""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

from tandem import tune
from tandem._core.errors import ConfigError
from tandem.air.integrations import mlflow as air_mlflow
from tandem.air.integrations import wandb as air_wandb
from tandem.air.integrations.mlflow import MLflowLoggerCallback, setup_mlflow
from tandem.air.integrations.wandb import WandbLoggerCallback

pytest.importorskip("mlflow")
pytest.importorskip("wandb")


def _never_runs(config):
    open(config["marker"], "w").close()
    tune.report({"x": 1})


def _fit_refused(tmp_path, callback) -> ConfigError:
    marker = tmp_path / "trial-ran"
    tuner = tune.Tuner(_never_runs, param_space={"marker": str(marker)},
                       run_config=tune.RunConfig(storage_path=str(tmp_path / "results"),
                                                 callbacks=[callback], verbose=0))
    with pytest.raises(ConfigError) as info:
        tuner.fit()
    assert not marker.exists(), "a trial started before the callback refused the run"
    return info.value


@pytest.fixture
def _mlflow_defaults(tmp_path, monkeypatch):
    import mlflow

    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is ./mlruns
    yield
    mlflow.set_tracking_uri(None)  # the callbacks set it process-wide, as Ray's do


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("uri", ["nosuchscheme://somewhere",
                                 "sqlite:///{tmp}/a-file/mlflow.db"])  # a file, not a folder
def test_mlflow_store_that_cannot_be_used_fails_fit_before_trials(tmp_path, uri,
                                                                  _mlflow_defaults):
    (tmp_path / "a-file").write_text("not a folder")
    uri = uri.format(tmp=tmp_path)
    err = _fit_refused(tmp_path, MLflowLoggerCallback(uri, experiment_name="e"))
    assert f"MLflowLoggerCallback(tracking_uri={uri!r})" in str(err)
    assert "sqlite:///mlflow.db" in str(err)  # what to use instead


def test_mlflow_server_that_does_not_answer_is_refused_quickly(tmp_path, _mlflow_defaults):
    uri = f"http://127.0.0.1:{_closed_port()}"
    start = time.monotonic()
    err = _fit_refused(tmp_path, MLflowLoggerCallback(uri))
    assert time.monotonic() - start < 30  # MLflow's own client retries for minutes
    assert "no MLflow tracking server answers there" in str(err) and uri in str(err)


def test_setup_mlflow_without_an_experiment_says_how_to_get_one(tmp_path, _mlflow_defaults):
    with pytest.raises(ConfigError, match="create_experiment_if_not_exists=True"):
        setup_mlflow({"a": 1}, tracking_uri=f"sqlite:///{tmp_path}/m.db",
                     experiment_name="missing")


@pytest.mark.parametrize("module, build, extra", [
    ("mlflow", lambda: MLflowLoggerCallback(), "mlflow"),
    ("mlflow", lambda: setup_mlflow({}), "mlflow"),
    ("wandb", lambda: WandbLoggerCallback(project="p"), "wandb"),
    ("wandb", lambda: air_wandb.setup_wandb({}), "wandb"),
])
def test_missing_package_names_the_extra_to_install(monkeypatch, module, build, extra):
    monkeypatch.setitem(sys.modules, module, None)  # as if not installed
    with pytest.raises(ImportError, match=rf'pip install "tandem-ml\[{extra}\]"'):
        build()


def test_unknown_wandb_mode_is_refused_when_the_callback_is_built():
    with pytest.raises(ConfigError, match=r"mode='ofline'.*'online', 'offline', 'disabled'"):
        WandbLoggerCallback(project="p", mode="ofline")
    with pytest.raises(ConfigError, match="mode='ofline'"):
        air_wandb.setup_wandb({}, mode="ofline")


def test_wandb_mode_from_the_environment_is_checked_before_trials(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "sometimes")
    err = _fit_refused(tmp_path, WandbLoggerCallback(project="p"))
    assert "WANDB_MODE='sometimes'" in str(err)


def test_wandb_without_a_project_fails_fit_before_trials(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_PROJECT_NAME", raising=False)
    err = _fit_refused(tmp_path, WandbLoggerCallback(mode="offline"))
    assert "project=" in str(err) and "WANDB_PROJECT_NAME" in str(err)


def test_wandb_online_without_a_key_says_to_log_in_or_go_offline(tmp_path, monkeypatch):
    for var in ("WANDB_API_KEY", "WANDB_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc, no wandb login
    monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))
    err = _fit_refused(tmp_path, WandbLoggerCallback(project="p"))
    assert "no W&B API key found" in str(err) and "mode='offline'" in str(err)
    assert "WANDB_API_KEY" not in os.environ


def test_air_paths_are_the_tune_classes():
    assert air_mlflow.MLflowLoggerCallback is tune.MLflowLoggerCallback
    assert air_wandb.WandbLoggerCallback is tune.WandbLoggerCallback
    assert issubclass(tune.MLflowLoggerCallback, tune.LoggerCallback)
    import tandem.air
    from tandem import train

    assert tandem.air.RunConfig is train.RunConfig  # from ray.air import RunConfig ...
    assert tandem.air.ScalingConfig is train.ScalingConfig


# -- the callbacks driven hook by hook (no workers), as the tune controller calls them ----------
def test_mlflow_callback_keeps_one_run_across_restarts_and_kills_open_runs(tmp_path,
                                                                         _mlflow_defaults):
    from mlflow.tracking import MlflowClient

    from tandem.tune.trial import TuneTrial

    uri = f"sqlite:///{tmp_path}/m.db"
    cb = MLflowLoggerCallback(uri, experiment_name="pbt")
    cb.setup(stop=None, num_samples=2, total_num_samples=2)
    a = TuneTrial("a1", {"lr": 0.1}, name="f_a1", path=str(tmp_path / "f_a1"), index=0)
    b = TuneTrial("b2", {"lr": 0.2}, name="f_b2", path=str(tmp_path / "f_b2"), index=1)
    for trial in (a, b):
        cb.on_trial_start(iteration=0, trials=[a, b], trial=trial)
        cb.on_trial_result(iteration=1, trials=[a, b], trial=trial,
                           result={"training_iteration": 1, "loss": 1.0, "timesteps_total": 64})
    a.config = {"lr": 0.05, "momentum": 0.9}  # a PBT exploit restarts "a" with a new config
    cb.on_trial_start(iteration=2, trials=[a, b], trial=a)
    cb.on_trial_result(iteration=3, trials=[a, b], trial=a,
                       result={"training_iteration": 2, "loss": 0.5})
    cb.on_trial_complete(iteration=4, trials=[a, b], trial=a)
    cb.on_experiment_end(trials=[a, b])  # "b" was still running: interrupted

    client = MlflowClient(uri)
    runs = {r.info.run_name: r for r in client.search_runs(
        [client.get_experiment_by_name("pbt").experiment_id])}
    assert sorted(runs) == ["f_a1", "f_b2"]  # one run per trial, restarts included
    ra = runs["f_a1"]
    assert ra.data.params == {"lr": "0.1", "momentum": "0.9"}  # params are write-once
    steps = [(m.step, m.value) for m in client.get_metric_history(ra.info.run_id, "loss")]
    assert steps == [(64, 1.0), (2, 0.5)]  # timesteps_total is the step when reported
    assert ra.info.status == "FINISHED" and runs["f_b2"].info.status == "KILLED"


def test_a_tuning_logger_in_a_trainers_run_config_is_refused_before_workers_start(tmp_path):
    from tandem.train import DataParallelTrainer, RunConfig

    marker = tmp_path / "worker-ran"

    def loop(config):
        open(config["marker"], "w").close()

    trainer = DataParallelTrainer(
        loop, train_loop_config={"marker": str(marker)},
        run_config=RunConfig(storage_path=str(tmp_path), callbacks=[
            WandbLoggerCallback(project="p", mode="offline")]))
    with pytest.raises(ConfigError, match=r"setup_wandb\(\.\.\.\) inside the train function"):
        trainer.fit()
    assert not marker.exists()
