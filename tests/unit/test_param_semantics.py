"""Issue 17, item 9: defaults follow Ray 2.60's, and what tandem cannot honour is refused
with an error that names the parameter and says what to do instead."""

from __future__ import annotations

import inspect
import warnings
from typing import Any

import pytest

from tandem import tune
from tandem._core.errors import ConfigError
from tandem.train import (
    CheckpointConfig,
    DataConfig,
    DataParallelTrainer,
    RunConfig,
    ScalingConfig,
)
from tandem.train.torch import TorchConfig, TorchTrainer


def _ray_pairs() -> list[tuple[Any, Any]]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import ray
        import ray.train as rtr
        import ray.train.torch as rtt
        import ray.tune as rt
        import ray.tune.schedulers as rs
        import ray.tune.search as rse
        from ray.tune.search.optuna import OptunaSearch

    import tandem
    import tandem.tune.schedulers as ts
    import tandem.tune.search as tse
    from tandem.train import FailureConfig

    pairs: list[tuple[Any, Any]] = [
        (ray.init, tandem.init), (rt.run, tune.run), (rt.Tuner, tune.Tuner),
        (rt.TuneConfig, tune.TuneConfig), (rt.RunConfig, RunConfig),
        (rt.CheckpointConfig, CheckpointConfig), (rt.FailureConfig, FailureConfig),
        (rtr.ScalingConfig, ScalingConfig), (rtr.DataConfig, DataConfig),
        (rtt.TorchConfig, TorchConfig), (rtt.TorchTrainer, TorchTrainer),
        (rse.BasicVariantGenerator, tse.BasicVariantGenerator),
        (rse.ConcurrencyLimiter, tse.ConcurrencyLimiter), (OptunaSearch, tse.OptunaSearch),
    ]
    pairs += [(getattr(rs, n), getattr(ts, n)) for n in (
        "ASHAScheduler", "HyperBandScheduler", "MedianStoppingRule",
        "PopulationBasedTraining", "FIFOScheduler")]
    return pairs


def test_defaults_are_rays_for_every_shared_parameter() -> None:
    """A Ray program that leaves a parameter out gets Ray's default here too (Ray Tune's
    RunConfig/CheckpointConfig/FailureConfig, which are the ones a Tune program uses; Ray
    Train V2 marks stop/verbose/sync_config/log_to_file/fail_fast as removed)."""
    compared, differ = 0, []
    for ray_obj, ours in _ray_pairs():
        theirs = inspect.signature(ray_obj).parameters
        for name, p in inspect.signature(ours).parameters.items():
            if name not in theirs or p.kind is p.VAR_KEYWORD:
                continue
            compared += 1
            if theirs[name].default != p.default:
                differ.append(f"{ours.__qualname__}({name}): Ray {theirs[name].default!r}, "
                              f"tandem {p.default!r}")
    assert compared > 100
    assert not differ, differ


def test_changed_defaults() -> None:
    assert tune.TuneConfig().reuse_actors is False
    assert RunConfig().log_to_file is False
    assert CheckpointConfig().checkpoint_at_end is None
    assert TorchConfig().init_method == "env"
    assert inspect.signature(tune.run).parameters["resume"].default is None


# -- refused, naming the parameter and what to do ---------------------------------------------
@pytest.mark.parametrize(("make", "names"), [
    (lambda: ScalingConfig(trainer_resources={"CPU": 1}), ["trainer_resources", "Remove"]),
    (lambda: ScalingConfig(trainer_resources={"GPU": 0.5}), ["trainer_resources"]),
    (lambda: RunConfig(sync_config=object()), ["sync_config", "storage_path", "remove"]),
    (lambda: RunConfig(log_to_file=("out",)), ["log_to_file", "pair"]),
    (lambda: RunConfig(log_to_file="a/b"), ["log_to_file", "without '/'"]),
    (lambda: TorchConfig(init_method="file"), ["init_method", "'env'"]),
    (lambda: DataConfig(execution_options={"x": 1}), ["execution_options"]),
    (lambda: DataConfig(datasets_to_split="train"), ["datasets_to_split", "list"]),
    (lambda: tune.TuneConfig(trial_name_creator="name"), ["trial_name_creator"]),
    (lambda: tune.run("x", progress_reporter=object()), ["progress_reporter", "ProgressReporter"]),
    (lambda: tune.run("x", sync_config=object()), ["sync_config"]),
    (lambda: tune.run("x", log_to_file=3), ["log_to_file"]),
])
def test_refused_with_the_parameter_named(make: Any, names: list[str]) -> None:
    with pytest.raises(ConfigError) as e:
        make()
    for n in names:
        assert n in str(e.value)


def test_zero_trainer_resources_is_what_tandem_does() -> None:
    # Ray programs pass {"CPU": 0} so the coordinator takes nothing: tandem's takes nothing
    assert ScalingConfig(trainer_resources={"CPU": 0}).bundles == ({"CPU": 1.0},)
    assert ScalingConfig(trainer_resources={}).num_workers == 1


def _fn(config: dict) -> None:
    return None


def test_a_trainer_refuses_tuning_only_settings() -> None:
    with pytest.raises(ConfigError, match=r"stop=.*Tuner"):
        TorchTrainer(_fn, run_config=RunConfig(stop={"training_iteration": 3}))
    for cc in (CheckpointConfig(checkpoint_frequency=2), CheckpointConfig(checkpoint_at_end=True)):
        with pytest.raises(ConfigError, match=r"checkpoint_(frequency|at_end).*train.report"):
            TorchTrainer(_fn, run_config=RunConfig(checkpoint_config=cc))
    # what a trainer does read is still accepted
    TorchTrainer(_fn, run_config=RunConfig(checkpoint_config=CheckpointConfig(num_to_keep=2)))


def test_a_function_trainable_refuses_checkpoint_schedules_as_ray_does() -> None:
    for kw in ({"checkpoint_at_end": True}, {"checkpoint_frequency": 3}):
        name = next(iter(kw))
        with pytest.raises(ConfigError, match=rf"{name}=.*function trainable.*tune.report"):
            tune.Tuner(_fn, run_config=RunConfig(checkpoint_config=CheckpointConfig(**kw)))
        with pytest.raises(ConfigError, match=rf"{name}=.*a Trainer"):
            tune.Tuner(TorchTrainer(_fn),
                       run_config=RunConfig(checkpoint_config=CheckpointConfig(**kw)))


def test_data_config_names_must_be_datasets() -> None:
    with pytest.raises(ConfigError, match=r"datasets_to_split.*'valid'.*has 'train'"):
        DataParallelTrainer(_fn, datasets={"train": [1, 2]},
                            dataset_config=DataConfig(datasets_to_split=["valid"]))
    with pytest.raises(ConfigError, match="dataset_config must be a tandem.train.DataConfig"):
        DataParallelTrainer(_fn, datasets={"train": [1, 2]}, dataset_config={"x": 1})
