"""Bad input gets a clear error before any process starts."""

from __future__ import annotations

import psutil
import pytest

import tandem
from tandem import train
from tandem._core.errors import ConfigError
from tandem.train import (
    Checkpoint,
    CheckpointConfig,
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from tandem.train.torch import TorchConfig

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def _assert_nothing_started():
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    yield
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    assert after <= before, "a bad input started processes"


@pytest.mark.parametrize("n", [0, -1, 1.5, "2", True])
def test_num_workers(n):
    with pytest.raises(ConfigError, match=r"num_workers=.*must be an integer >= 1"):
        ScalingConfig(num_workers=n)


def test_negative_resource():
    with pytest.raises(ConfigError, match=r"\['CPU'\] is -1.*cannot be negative"):
        ScalingConfig(resources_per_worker={"CPU": -1})


def test_misspelled_resource():
    with pytest.raises(ConfigError, match=r"'gpu'; did you mean 'GPU'"):
        ScalingConfig(resources_per_worker={"gpu": 1})


def test_non_numeric_resource():
    with pytest.raises(ConfigError, match=r"must be a number, got 'two'"):
        ScalingConfig(resources_per_worker={"CPU": "two"})


def test_unknown_resource_is_refused_naming_it(tmp_path):
    tandem.init(num_cpus=2)
    trainer = DataParallelTrainer(lambda: None, scaling_config=ScalingConfig(
        resources_per_worker={"TPU": 1}), run_config=RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(tandem._core.errors.ResourcesUnavailableError, match=r"TPU=1.*TPU=0"):
        trainer.fit()


def test_not_callable():
    with pytest.raises(ConfigError, match="must be a function"):
        DataParallelTrainer("train.py")


def test_too_many_parameters():
    def f(config, data):
        pass

    with pytest.raises(ConfigError, match=r"takes 2 required parameters \(config, data\)"):
        DataParallelTrainer(f)


def test_config_for_function_without_parameter():
    with pytest.raises(ConfigError, match="takes no parameter"):
        DataParallelTrainer(lambda: None, train_loop_config={"lr": 1})


def test_missing_checkpoint_directory(tmp_path):
    with pytest.raises(ConfigError, match="that directory is missing"):
        Checkpoint.from_directory(tmp_path / "nope")
    ckpt = Checkpoint(str(tmp_path / "gone"))
    with pytest.raises(ConfigError, match="does not exist"):
        DataParallelTrainer(lambda: None, resume_from_checkpoint=ckpt)


def test_bad_configs():
    with pytest.raises(ConfigError, match="max_failures=-2"):
        FailureConfig(max_failures=-2)
    with pytest.raises(ConfigError, match="num_to_keep=0"):
        CheckpointConfig(num_to_keep=0)
    with pytest.raises(ConfigError, match="checkpoint_score_order='up'"):
        CheckpointConfig(checkpoint_score_order="up")
    with pytest.raises(ConfigError, match="placement_strategy='RANDOM'"):
        ScalingConfig(placement_strategy="RANDOM")
    with pytest.raises(ConfigError, match="backend='tcp'"):
        TorchConfig(backend="tcp")
    with pytest.raises(ConfigError, match="scaling_config must be"):
        DataParallelTrainer(lambda: None, scaling_config={"num_workers": 2})
    with pytest.raises(ConfigError, match="name='a/b'"):
        RunConfig(name="a/b")


def test_report_outside_a_worker():
    with pytest.raises(train.session.SessionMisuseError, match="outside a training worker"):
        train.report({"x": 1})
    assert train.get_checkpoint() is None
    assert train.get_context().get_world_size() == 1


def test_unpicklable_train_function(tmp_path):
    import threading

    lock = threading.Lock()

    def f():
        with lock:
            pass

    tandem.init(num_cpus=2)
    with pytest.raises(ConfigError, match="cannot be sent to the workers"):
        DataParallelTrainer(f, run_config=RunConfig(storage_path=str(tmp_path))).fit()


def test_init_twice_and_bad_init():
    tandem.init(num_cpus=1)
    with pytest.raises(ConfigError, match="already running"):
        tandem.init(num_cpus=1)
    tandem.shutdown()
    with pytest.raises(ConfigError, match="num_cpus=-1"):
        tandem.init(num_cpus=-1)
    with pytest.raises(ConfigError, match="cluster='k8s'"):
        tandem.init(cluster="k8s")
