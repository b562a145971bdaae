"""Ray's config parameters that tandem lacked, on one real run and as checks of input."""

from __future__ import annotations

import logging
import os

import pytest

import tandem
from tandem import train, tune
from tandem._core.errors import ConfigError
from tandem.train import (
    DataParallelTrainer,
    FailureConfig,
    LoggingConfig,
    RunConfig,
    ScalingConfig,
    SyncConfig,
)


def _loop():
    train.report({"flag": os.environ.get("MY_FLAG")})


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_worker_env_accelerator_and_log_level_on_a_real_run(storage):
    # a node that declares the accelerator, as Ray's nodes do with accelerator_type:<type>
    tandem.init(num_cpus=1, resources={"accelerator_type:T4": 1})
    result = DataParallelTrainer(
        _loop,
        scaling_config=ScalingConfig(num_workers=1, accelerator_type="T4"),
        run_config=RunConfig(
            name="params", storage_path=storage, verbose=0,
            worker_runtime_env={"env_vars": {"MY_FLAG": "on"}},
            logging_config=LoggingConfig(log_level="warning"),
        ),
    ).fit()
    assert result.error is None and result.metrics["flag"] == "on"
    assert logging.getLogger("tandem.train").level == logging.WARNING
    logging.getLogger("tandem.train").setLevel(logging.NOTSET)
    with pytest.raises(Exception, match="accelerator_type:V100"):  # no node has one
        DataParallelTrainer(
            _loop, scaling_config=ScalingConfig(num_workers=1, accelerator_type="V100"),
            run_config=RunConfig(name="v100", storage_path=storage, verbose=0)).fit()


def test_refused_and_checked_parameters():
    with pytest.raises(ConfigError, match="no TPU devices"):
        ScalingConfig(use_tpu=True)
    with pytest.raises(ConfigError, match="no TPU devices"):
        ScalingConfig(topology="2x2")
    with pytest.raises(ConfigError, match="carry no labels"):
        ScalingConfig(label_selector={"zone": "a"})
    with pytest.raises(ConfigError, match="accelerator's name"):
        ScalingConfig(accelerator_type="")
    assert ScalingConfig(accelerator_type="A100", use_gpu=True).worker_bundle == {
        "CPU": 1.0, "GPU": 1.0, "accelerator_type:A100": 0.001}
    with pytest.raises(ConfigError, match="controller_failure_limit"):
        FailureConfig(controller_failure_limit=-2)
    assert FailureConfig(controller_failure_limit=3).controller_failure_limit == 3
    with pytest.raises(ValueError, match="Invalid log_level"):
        LoggingConfig(log_level="LOUD")
    with pytest.raises(ConfigError, match="installs nothing per job"):
        RunConfig(worker_runtime_env={"pip": ["x"]})
    with pytest.raises(ConfigError, match="logging_config"):
        RunConfig(logging_config="DEBUG")
    # nothing is ever left to sync: a SyncConfig is accepted, artifact syncing is refused
    assert tune.RunConfig(sync_config=SyncConfig(sync_period=10)).sync_config is None
    with pytest.raises(ConfigError, match="get_trial_dir"):
        tune.RunConfig(sync_config=SyncConfig(sync_artifacts=True))
    tune.register_env("corridor", lambda env_config: ("env", env_config))
    from tandem.tune.experiment.experiment import get_env_creator

    assert get_env_creator("corridor")({"n": 3}) == ("env", {"n": 3})
    with pytest.raises(TypeError, match="must be callable"):
        tune.register_env("bad", 3)
    with pytest.raises(ConfigError, match="No environment registered"):
        get_env_creator("missing")


def _fails(config):
    raise ValueError("bad trial")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_tune_run_fail_fast_and_checkpoint_config(storage):
    tandem.init(num_cpus=1)
    with pytest.raises(Exception, match="bad trial"):
        tune.run(_fails, storage_path=storage, name="ff", verbose=0, fail_fast="raise",
                 checkpoint_config=tune.CheckpointConfig(num_to_keep=1))


def test_deprecated_and_refused_tune_parameters(storage):
    with pytest.raises(DeprecationWarning, match="RunConfig\\(storage_path\\)"):
        tune.RunConfig(local_dir="/tmp/x")
    with pytest.raises(DeprecationWarning, match="chdir_to_trial_dir"):
        tune.TuneConfig(chdir_to_trial_dir=False)
    with pytest.raises(DeprecationWarning, match="chdir_to_trial_dir"):
        tune.run(_fails, chdir_to_trial_dir=False)
    with pytest.raises(ConfigError, match="export_formats"):
        tune.run(_fails, export_formats=["h5"])
    with pytest.raises(ConfigError, match="checkpoint_config only"):
        tune.run(_fails, checkpoint_freq=2, checkpoint_config=tune.CheckpointConfig())
    with pytest.raises(ConfigError, match="progress_reporter"):
        tune.RunConfig(progress_reporter="table")
    with pytest.raises(DeprecationWarning, match="progress_reporter"):
        DataParallelTrainer(_loop, run_config=RunConfig(
            storage_path=storage, progress_reporter=tune.CLIReporter()))
