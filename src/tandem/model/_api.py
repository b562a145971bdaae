"""``model.train`` and ``model.tune``: one train job per model, a Tuner over its space.

``train`` builds the model's trainer (``TorchTrainer`` for a ``TorchModel``) through its
public constructor with the framework's per-worker loop, and ``fit``s it: on the embedded
job service, or on the train server when one is configured (nothing changes in the
caller's code). ``tune`` hands that same trainer to a ``Tuner`` with
``param_space={"train_loop_config": space}``: every trial is a ``model.train`` job.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import cloudpickle

from tandem._core.errors import ConfigError
from tandem._core.ids import short_uid
from tandem.model import _data
from tandem.model._loop import WorkerPayload
from tandem.model._model import Model, pickled_by_value
from tandem.model._result import ModelJobHandle, ModelResult
from tandem.model._settings import TrainSettings, TuneSettings
from tandem.train import FailureConfig, Result, RunConfig, ScalingConfig
from tandem.train.progress import console_progress

if TYPE_CHECKING:
    from tandem.train import DataParallelTrainer
    from tandem.tune import ResultGrid


# -- resolving what the caller gave --------------------------------------------------------


def _resolve_model(m: Any, config: Mapping[str, object] | None) -> tuple[type[Model], dict, Model | None]:
    """``(class, config, instance or None)`` for a Model class, instance or registry ref."""
    if isinstance(m, str) or type(m).__name__ == "ModelRef":
        try:
            from tandem.model.registry import get as registry_get
        except ImportError:
            raise ConfigError(
                f"model.train({m!r}): a registry reference needs tandem's model registry, "
                f"which this installation lacks. Pass the Model class or instance."
            ) from None
        m = registry_get(m)
    if isinstance(m, type) and issubclass(m, Model):
        return m, {**m.default_config, **dict(config or {})}, None
    if isinstance(m, Model):
        return type(m), {**m.config, **dict(config or {})}, m
    raise ConfigError(
        f"model.train/tune takes a Model subclass, an instance of one, or a registry name; "
        f"got {type(m).__name__} {m!r:.60}."
    )


@dataclass
class _Plan:
    cls: type[Model]
    config: dict[str, Any]
    settings: TrainSettings
    trainer: DataParallelTrainer


def _build(m: object, config: Mapping[str, object] | None, train_settings: object, dataset: object,
           run_config: RunConfig | None, *, arg: str = "train_settings",
           name_suffix: str = "") -> _Plan:
    """Checks everything a run needs on the driver, then builds its trainer. Raises before
    any worker starts."""
    settings = TrainSettings.from_any(train_settings, arg)
    cls, cfg, instance = _resolve_model(m, config)
    cls.check_training_definition()
    if run_config is not None and not isinstance(run_config, RunConfig):
        raise ConfigError(
            f"run_config must be a tandem.train.RunConfig, got {type(run_config).__name__}."
        )
    if dataset is None:
        raise ConfigError(
            "model.train needs data: dataset={'train': train_data, 'valid': valid_data} (or a "
            "class/object whose setup() returns that dict, run on each worker)."
        )
    seed = settings.seed if settings.seed is not None else random.randrange(2**31)
    # a set-up instance's weights travel once, in memory, inside the payload
    init = instance.weights_state() if instance is not None and instance.is_setup else None
    payload = WorkerPayload(model_cls=cls, settings=settings, seed=seed, init_weights=init)
    data = _data.TrainerData()
    data_classes: list[Any] = []
    if _data.is_data_source(dataset):
        _data.check_source(dataset)
        payload.data_source = dataset
        data_classes.append(dataset if isinstance(dataset, type) else type(dataset))
    else:
        splits = _data.check_splits(dataset, "dataset")
        splits = {k: _data.normalize(k, v, settings.label_column, "dataset")
                  for k, v in splits.items()}
        _data.check_sizes(splits, settings.num_workers, "dataset")
        data = _data.TrainerData.of(splits)
        payload.splits = data.payload_splits
        payload.datasets = tuple(data.datasets)
        payload.datasets_to_split = data.to_split
        data_classes.extend(type(v) for v in data.payload_splits.values())
    with pickled_by_value(cls, *data_classes):
        payload_bytes = cloudpickle.dumps(payload)

    rc = run_config or RunConfig()
    if rc.name is None:
        stamp = datetime.datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        rc = dataclasses.replace(rc, name=f"{cls.__name__}{name_suffix}_{stamp}_{short_uid(4)}")
    if rc.failure_config is None or settings.max_failures != 0:
        rc = dataclasses.replace(rc, failure_config=FailureConfig(max_failures=settings.max_failures))
    trainer_cls = cls.trainer_class()
    trainer = trainer_cls(
        functools.partial(cls.worker_loop(), payload_bytes),
        train_loop_config=cfg,
        scaling_config=ScalingConfig(num_workers=settings.num_workers, use_gpu=settings.use_gpu,
                                     resources_per_worker=settings.resources_per_worker),
        run_config=rc,
        datasets=data.datasets,
        dataset_config=data.config,
        metadata={"progress_total": settings.num_epochs, "progress_key": "epoch",
                  "model_class": f"{cls.__module__}.{cls.__qualname__}"},
    )
    return _Plan(cls, cfg, settings, trainer)


# -- the two entry points -------------------------------------------------------------------


def train(
    m: object,
    *,
    config: Mapping[str, object] | None = None,
    train_settings: TrainSettings | Mapping[str, object] | None = None,
    dataset: object = None,
    block: bool = True,
    run_config: RunConfig | None = None,
) -> ModelResult | ModelJobHandle:
    """Trains ``m`` as one job of ``num_workers`` workers (DDP for a ``TorchModel``).

    Args:
        m: a ``Model`` subclass, an instance (its config, and its weights when it is set
            up, are the starting point) or a registry reference (``"name"``, ``"name@3"``).
        config: overrides of the model's config.
        train_settings: a ``TrainSettings`` or a dict of its fields.
        dataset: ``{"train": ..., "valid": ...}`` or a data class/object with ``setup()``.
        block: wait and return the ``ModelResult``; False returns a handle at once.
        run_config: name, storage, callbacks, ``verbose`` (0 silences the console).

    Returns:
        ``ModelResult`` (``.model`` is the trained instance), or with ``block=False`` a
        ``ModelJobHandle`` whose ``wait()`` returns it.

    Raises:
        ConfigError / ModelDefinitionError: bad settings, data or model, before any worker
            starts.
        TrainingFailedError: a worker failed and ``max_failures`` is spent.
    """
    plan = _build(m, config, train_settings, dataset, run_config)
    if not block:
        handle: Any = plan.trainer.fit(block=False)
        progress = console_progress(handle, plan.trainer.run_config, plan.settings.num_workers,
                                    total=plan.settings.num_epochs, key="epoch")
        return ModelJobHandle(handle, progress)
    result = plan.trainer.fit()
    return ModelResult.from_result(result)  # type: ignore[arg-type]


def _unknown_keys(space: Mapping[str, Any], config: Mapping[str, Any], prefix: str = "") -> list[str]:
    out = []
    for key, value in space.items():
        if key not in config:
            out.append(prefix + str(key))
        elif isinstance(value, Mapping) and isinstance(config[key], Mapping) \
                and "grid_search" not in value:
            out.extend(_unknown_keys(value, config[key], f"{prefix}{key}."))
    return out


def tune(
    m: object,
    *,
    tune_settings: TuneSettings | Mapping[str, object] | None = None,
    param_space: Mapping[str, object] | None = None,
    train_settings: TrainSettings | Mapping[str, object] | None = None,
    dataset: object = None,
    run_config: RunConfig | None = None,
    config: Mapping[str, object] | None = None,
) -> ResultGrid:
    """Tunes ``m`` over ``param_space`` (default ``m.hyperparameter_space()``): every trial is
    a ``model.train`` job with the sampled config.

    Returns:
        a ``ResultGrid`` of ``ModelResult``s (``get_best_result().model`` loads).
    """
    from tandem.tune import ResultGrid, TuneConfig, Tuner

    ts = TuneSettings.from_any(tune_settings)
    # stop criteria are the Tuner's (a trainer's own fit() refuses them)
    stop = run_config.stop if run_config is not None else None
    if run_config is not None and stop is not None:
        run_config = dataclasses.replace(run_config, stop=None)
    plan = _build(m, config, train_settings, dataset, run_config, name_suffix="_tune")
    cls = plan.cls
    space = dict(param_space) if param_space is not None else dict(cls.hyperparameter_space())
    where = "param_space" if param_space is not None else f"{cls.__name__}.hyperparameter_space()"
    if not isinstance(space, Mapping) or not space:
        raise ConfigError(
            f"{where} is empty: there is nothing to tune. Return a dict of config keys to "
            f"search spaces, e.g. {{'lr': tune.loguniform(1e-4, 1e-1)}}."
        )
    unknown = _unknown_keys(space, plan.config)
    if unknown:
        raise ConfigError(
            f"{where} names config key{'s' if len(unknown) > 1 else ''} {unknown} that "
            f"{cls.__name__} does not have; its config keys are {sorted(plan.config)}. Add "
            f"them to {cls.__name__}.default_config, or fix the names."
        )
    metric = ts.metric or "loss"
    mode = ts.mode or "min"
    tuner = Tuner(
        plan.trainer,
        param_space={"train_loop_config": space},
        tune_config=TuneConfig(metric=metric, mode=mode, num_samples=ts.num_samples,
                               scheduler=ts.scheduler, search_alg=ts.search_alg,
                               max_concurrent_trials=ts.max_concurrent_trials),
        run_config=dataclasses.replace(plan.trainer.run_config, stop=stop),
    )
    grid = tuner.fit()
    results: list[Result] = []
    for r in grid:
        sampled = (r.config or {}).get("train_loop_config", {}) if isinstance(r.config, dict) else {}
        results.append(ModelResult.from_result(r, config={**plan.config, **sampled}))
    ids = [t for t in grid.trial_ids if t is not None]
    return ResultGrid(results, grid.experiment_path, metric, mode,
                      trial_ids=ids if len(ids) == len(results) else None)
