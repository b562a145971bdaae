"""``Experiment`` and the trainable registry (``tune.register_trainable``)."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tandem._core.errors import ConfigError

__all__ = ["Experiment", "get_trainable", "register_trainable"]

_REGISTRY: dict[str, Any] = {}


def register_trainable(name: str, trainable: Callable[..., object] | type,
                       warn: bool = True) -> None:
    """Registers ``trainable`` under ``name`` in this process, so that ``tune.run(name)``,
    ``Experiment(name, run=name)`` and ``Tuner(name)`` find it (Ray's registry).

    Raises:
        TypeError: ``trainable`` is not callable (a function, a Trainable class or a Trainer).
    """
    if not isinstance(name, str) or not name:
        raise TypeError(f"register_trainable(name={name!r}): the name must be a non-empty str.")
    if not callable(trainable):
        raise TypeError(
            f"register_trainable({name!r}, {trainable!r:.60}): a trainable must be a function, "
            f"a tune.Trainable class or a Trainer; got {type(trainable).__name__}."
        )
    if warn and name in _REGISTRY and _REGISTRY[name] is not trainable:
        import logging

        logging.getLogger(__name__).warning(
            "register_trainable(%r): replacing the trainable registered under that name.", name)
    _REGISTRY[name] = trainable


_ENVS: dict[str, Callable[..., Any]] = {}


def register_env(name: str, env_creator: Callable[..., object]) -> None:
    """Registers an environment creator under ``name`` (Ray's ``tune.register_env``):
    ``env_creator(env_config)`` builds the environment; :func:`get_env_creator` finds it.
    tandem has no RLlib, so nothing here builds environments by itself: a trainable that
    needs one calls ``get_env_creator(name)(env_config)``."""
    if not callable(env_creator):
        raise TypeError("Second argument must be callable.", env_creator)
    _ENVS[name] = env_creator


def get_env_creator(name: str) -> Callable[..., Any]:
    """The creator :func:`register_env` stored under ``name``."""
    try:
        return _ENVS[name]
    except KeyError:
        raise ConfigError(
            f"No environment registered under {name!r}; registered: {sorted(_ENVS) or 'none'}. "
            "Call tune.register_env(name, creator) first (in the process that uses it)."
        ) from None


def get_trainable(name: str) -> Any:
    """The trainable registered under ``name``.

    Raises:
        ConfigError: nothing is registered under that name.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        known = sorted(_REGISTRY) or "none"
        raise ConfigError(
            f"No trainable is registered as {name!r} (registered: {known}). Call "
            f"tune.register_trainable({name!r}, fn) first, or pass the function itself."
        ) from None


class Experiment:
    """One experiment's description, as Ray's ``tune.Experiment``: ``tune.run(experiment)``
    or ``tune.run_experiments([...])`` run it with these settings (each is the
    ``tune.run`` keyword of the same name).

    Args:
        name: The experiment folder's name under ``storage_path``.
        run: The trainable: a function, a ``Trainable`` class, or a registered name.
    """

    def __init__(
        self,
        name: str,
        run: str | Callable[..., Any] | type,
        *,
        stop: Mapping[str, Any] | Callable[[str, Mapping], bool] | Any | None = None,
        time_budget_s: float | datetime.timedelta | None = None,
        config: dict[str, Any] | None = None,
        resources_per_trial: Any = None,
        num_samples: int = 1,
        storage_path: str | None = None,
        storage_filesystem: Any = None,
        sync_config: Any = None,
        checkpoint_config: Any = None,
        trial_name_creator: Callable[[Any], str] | None = None,
        trial_dirname_creator: Callable[[Any], str] | None = None,
        log_to_file: bool = False,
        export_formats: Sequence[str] | None = None,
        max_failures: int = 0,
        restore: str | None = None,
        local_dir: str | None = None,
    ) -> None:
        from tandem.train.api.config import CheckpointConfig, RunConfig, storage_url

        if not isinstance(name, str) or not name:
            raise ConfigError(f"Experiment(name={name!r}): give the experiment a name.")
        if local_dir is not None:
            raise DeprecationWarning(
                "The `local_dir` argument is deprecated. Use `storage_path` instead "
                "(Experiment(storage_path=...)), as in Ray.")
        if export_formats:
            raise ConfigError(
                f"Experiment(export_formats={export_formats!r}) is not supported: Ray's model "
                f"export for RLlib policies has no counterpart; save models in the trainable.")
        if restore is not None:
            raise ConfigError(
                f"Experiment(restore={restore!r}) is not supported (Ray deprecated it too): "
                f"load the checkpoint in the trainable, or resume the experiment with "
                f"tune.Tuner.restore(path, trainable).")
        self.name = name
        self.run = get_trainable(run) if isinstance(run, str) else run
        if not callable(self.run):
            raise ConfigError(f"Experiment(run={run!r}): give a function, a Trainable class "
                              f"or a registered trainable name.")
        if isinstance(checkpoint_config, Mapping):
            checkpoint_config = CheckpointConfig(**checkpoint_config)
        if storage_filesystem is not None:
            storage_path = storage_url(storage_filesystem, storage_path)
        RunConfig(sync_config=sync_config, log_to_file=log_to_file)  # refuses what it must
        if isinstance(time_budget_s, datetime.timedelta):
            time_budget_s = time_budget_s.total_seconds()
        self.stop = stop
        self.time_budget_s = time_budget_s
        self.config = dict(config or {})
        self.resources_per_trial = resources_per_trial
        self.num_samples = num_samples
        self.storage_path = storage_path
        self.checkpoint_config = checkpoint_config
        self.trial_name_creator = trial_name_creator
        self.trial_dirname_creator = trial_dirname_creator
        self.log_to_file = log_to_file
        self.max_failures = max_failures

    def run_kwargs(self) -> dict[str, Any]:
        """The ``tune.run`` keywords this experiment stands for."""
        kwargs: dict[str, Any] = {
            "name": self.name, "stop": self.stop, "time_budget_s": self.time_budget_s,
            "config": self.config, "resources_per_trial": self.resources_per_trial,
            "num_samples": self.num_samples, "storage_path": self.storage_path,
            "trial_name_creator": self.trial_name_creator,
            "trial_dirname_creator": self.trial_dirname_creator,
            "log_to_file": self.log_to_file, "max_failures": self.max_failures}
        cc = self.checkpoint_config
        if cc is not None:
            order = getattr(cc, "checkpoint_score_order", "max")
            attr = getattr(cc, "checkpoint_score_attribute", None)
            kwargs.update(
                keep_checkpoints_num=cc.num_to_keep,
                checkpoint_score_attr=(f"min-{attr}" if attr and order == "min" else attr),
                checkpoint_freq=cc.checkpoint_frequency or 0,
                checkpoint_at_end=bool(cc.checkpoint_at_end))
        return kwargs

    def get_trainable_name(self) -> str:
        return getattr(self.run, "__name__", type(self.run).__name__)

    def __repr__(self) -> str:
        return f"Experiment(name={self.name!r}, run={self.get_trainable_name()})"
