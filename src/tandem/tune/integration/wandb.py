"""Weights & Biases tracking: ``WandbLoggerCallback`` (one W&B run per trial, logged from
the driver) and ``setup_wandb`` (a W&B run inside a trial or a train worker).

Ray's ``ray.air.integrations.wandb`` with the same signatures and semantics (Ray 2.60);
Ray users import it from ``tandem.air.integrations.wandb``. Needs ``wandb``:
``pip install "tandem-ml[wandb]"``; imported when a callback is built or ``setup_wandb`` is
called, never at ``import tandem.tune``.

W&B's offline mode (``mode="offline"`` or ``WANDB_MODE=offline``) needs no account or
network: each run is written under ``<dir>/wandb/offline-run-<time>-<id>/`` (upload it later
with ``wandb sync``). ``WandbLoggerCallback`` puts each trial's run in the trial's folder;
``setup_wandb`` in a trial does the same.

Where tandem differs from Ray:

- Ray logs each trial from its own actor process; here each trial gets a thread in the
  driver and its own run (``wandb.init(reinit="create_new")``, which W&B supports since
  0.19), so trials log concurrently without one process per trial.
- An API key is not needed in offline or disabled mode given as ``mode=...`` too (Ray only
  skips the key check for the ``WANDB_MODE`` environment variable).
- An unknown ``mode`` is refused when the callback is built, naming the modes W&B has.
- A run whose trial failed ends with exit code 1 (W&B shows it failed); Ray ends every run
  the same way.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import urllib.error
import warnings
from collections.abc import Mapping, Sequence
from numbers import Number
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

from tandem._core.errors import ConfigError
from tandem._core.extras import import_optional
from tandem.train import session as train_session
from tandem.tune.callback import LoggerCallback, refuse_in_train_run
from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial

logger = logging.getLogger(__name__)

__all__ = ["WandbLoggerCallback", "setup_wandb"]

WANDB_ENV_VAR = "WANDB_API_KEY"
WANDB_PROJECT_ENV_VAR = "WANDB_PROJECT_NAME"
WANDB_GROUP_ENV_VAR = "WANDB_GROUP_NAME"
WANDB_MODE_ENV_VAR = "WANDB_MODE"
#: W&B's run modes (``wandb.init(mode=...)``).
WANDB_MODES = ("online", "offline", "disabled", "shared")
_NO_KEY_MODES = ("offline", "disabled", "dryrun")
#: Ray's default upload timeout (``ray.train._internal.syncer.DEFAULT_SYNC_TIMEOUT``).
DEFAULT_SYNC_TIMEOUT = 1800


def _import_wandb(what: str) -> ModuleType:
    return import_optional("wandb", "wandb", what)


def _check_mode(mode: object, where: str) -> None:
    if mode is not None and mode not in WANDB_MODES:
        raise ConfigError(
            f"{where}(mode={mode!r}): W&B has no such mode; the modes are "
            f"{', '.join(repr(m) for m in WANDB_MODES)}. Use mode='offline' to write runs "
            f"to disk without an account (upload them later with `wandb sync`)."
        )


def _env_mode(where: str) -> str | None:
    mode = os.environ.get(WANDB_MODE_ENV_VAR)
    if mode is not None and mode not in WANDB_MODES + ("dryrun", "run"):
        raise ConfigError(
            f"{where}: the environment variable {WANDB_MODE_ENV_VAR}={mode!r} is not a W&B "
            f"mode; use one of {', '.join(repr(m) for m in WANDB_MODES)} or unset it."
        )
    return mode


def _is_allowed_type(obj: object) -> bool:
    """What ``wandb.log`` takes as a value (Ray's rule): a number, a one-element array, a
    W&B media object or a list of them."""
    from wandb.sdk.data_types.base_types.wb_value import WBValue

    try:
        import numpy as np

        if isinstance(obj, np.ndarray) and obj.size == 1:
            return isinstance(obj.item(), Number)
    except ImportError:
        pass
    if isinstance(obj, Sequence) and not isinstance(obj, str) and len(obj) > 0:
        return isinstance(obj[0], WBValue)
    return isinstance(obj, (Number, WBValue))


def _clean_log(obj: object, *, video_kwargs: dict | None = None,
               image_kwargs: dict | None = None) -> Any:
    """Ray's ``_clean_log``: arrays of images/videos become W&B media; values W&B cannot
    serialize become a number or their ``str``."""
    video_kwargs = video_kwargs or {}
    image_kwargs = image_kwargs or {}
    kw = {"video_kwargs": video_kwargs, "image_kwargs": image_kwargs}
    if isinstance(obj, dict):
        return {k: _clean_log(v, **kw) for k, v in obj.items()}
    if isinstance(obj, (list, set)):
        return [_clean_log(v, **kw) for v in obj]
    if isinstance(obj, tuple):
        return tuple(_clean_log(v, **kw) for v in obj)
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy comes with wandb
        np = None  # type: ignore[assignment]
    if np is not None and isinstance(obj, np.ndarray) and obj.ndim in (3, 4, 5):
        import wandb

        if obj.ndim == 3:
            return wandb.Image(obj, **image_kwargs)
        if obj.ndim == 4:
            images = [wandb.Image(v, **image_kwargs) for v in obj]
            return images if len(images) > 1 else images[0]
        videos = [wandb.Video(v, **video_kwargs) for v in obj]
        return videos if len(videos) > 1 else videos[0]
    if _is_allowed_type(obj):
        return obj
    import pickle

    from wandb.util import json_dumps_safer

    try:
        json_dumps_safer(obj)
        pickle.dumps(obj)
        return obj
    except (TypeError, ValueError, pickle.PicklingError, AttributeError, RecursionError):
        fallback = str(obj)  # what W&B cannot take is logged as a number or a string
        for cast in (int, float):
            try:
                return cast(fallback)
            except ValueError:
                pass
        return fallback


def _get_wandb_project(project: str | None = None) -> str | None:
    if not project and os.environ.get(WANDB_PROJECT_ENV_VAR):
        project = os.environ.get(WANDB_PROJECT_ENV_VAR)
    return project


def _set_api_key(wandb: ModuleType, api_key_file: str | None, api_key: str | None,
                 mode: str | None, where: str) -> None:
    """Ray's order: ``api_key``/``api_key_file``, ``WANDB_API_KEY``, a ``wandb login``.
    Nothing is needed in offline or disabled mode."""
    if mode in _NO_KEY_MODES or os.environ.get(WANDB_MODE_ENV_VAR) in _NO_KEY_MODES:
        return
    if api_key_file:
        if api_key:
            raise ConfigError(f"{where}: both api_key_file and api_key were given; give one.")
        try:
            with open(os.path.expanduser(api_key_file)) as f:
                api_key = f.readline().strip()
        except OSError as e:
            raise ConfigError(f"{where}(api_key_file={api_key_file!r}): cannot read it "
                              f"({e}).") from e
    if not api_key and not os.environ.get(WANDB_ENV_VAR):
        try:
            wandb.ensure_configured()
            if wandb.api.api_key:
                return
        except AttributeError:
            pass
    if api_key:
        os.environ[WANDB_ENV_VAR] = api_key
    elif not os.environ.get(WANDB_ENV_VAR):
        raise ConfigError(
            f"{where}: no W&B API key found. Set the {WANDB_ENV_VAR} environment variable, "
            f"pass api_key= or api_key_file=, run `wandb login`, or log offline without an "
            f"account: mode='offline' (or {WANDB_MODE_ENV_VAR}=offline)."
        )


class _TrialLogger(threading.Thread):
    """One trial's W&B run, fed through a queue by the driver (Ray's ``_WandbLoggingActor``,
    as a thread): ``("result", dict)``, ``("checkpoint", path)``, ``("end", failed)``."""

    def __init__(self, wandb: ModuleType, logdir: str, exclude: list[str],
                 to_config: list[str], init_kwargs: dict[str, Any]) -> None:
        super().__init__(name=f"wandb-{init_kwargs.get('name')}", daemon=True)
        self.wandb = wandb
        self.queue: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._exclude = set(exclude)
        self._to_config = set(to_config)
        self._logdir = logdir
        self._kwargs = init_kwargs
        self._trial_name = init_kwargs.get("name", "unknown")
        self.error: BaseException | None = None
        self.sync_file: str | None = None  # the run's .wandb file, once it started

    def run(self) -> None:
        try:
            run = self.wandb.init(**self._kwargs)
        except BaseException as e:  # noqa: BLE001 - reported by the callback, not lost
            self.error = e
            logger.error("W&B run of trial %s could not start: %s", self._trial_name, e)
            return
        self.sync_file = getattr(getattr(run, "settings", None), "sync_file", None)
        try:
            run.config.update({"trial_log_path": self._logdir}, allow_val_change=True)
            while True:
                kind, content = self.queue.get()
                if kind == "end":
                    run.finish(exit_code=1 if content else 0)
                    return
                if kind == "checkpoint":
                    artifact = self.wandb.Artifact(name=f"checkpoint_{self._trial_name}",
                                                   type="model")
                    artifact.add_dir(content)
                    run.log_artifact(artifact)
                    continue
                log, config_update = self._handle_result(content)
                try:
                    run.config.update(config_update, allow_val_change=True)
                    run.log(log, step=log.get("training_iteration"))
                except urllib.error.HTTPError as e:
                    logger.warning("Failed to log result to W&B: %s", e)
        except BaseException as e:  # noqa: BLE001
            self.error = e
            logger.error("W&B logging of trial %s failed: %s", self._trial_name, e)
            run.finish(exit_code=1)

    def _handle_result(self, result: dict[str, Any]) -> tuple[dict, dict]:
        config_update = dict(result.get("config", {}) or {})
        log: dict[str, Any] = {}
        for k, v in flatten_dict(result).items():
            if any(k.startswith(item + "/") or k == item for item in self._exclude):
                continue
            if any(k.startswith(item + "/") or k == item for item in self._to_config):
                config_update[k] = v
            elif _is_allowed_type(v):
                log[k] = v
        config_update.pop("callbacks", None)
        return log, config_update


#: The suffix of the callback's runs' folders (``offline-run-<time>-<trial id>-callback``).
CALLBACK_SYNC_DIR_SUFFIX = "callback"


def _own_sync_dir(settings: Any) -> Any:
    """``settings`` with the callback's own run-folder suffix (unless it has one).

    The callback's run and a ``setup_wandb`` run in the trial share the trial's id and
    folder, and W&B names a run's folder ``<mode>-run-<second>-<id>``: two processes that
    start those runs within the same second would both write one ``run-<id>.wandb`` file
    (W&B's own de-duplication, a suffix when the folder exists, cannot see a folder another
    process is about to create). The callback's runs take a fixed suffix instead."""
    fields = getattr(type(settings), "model_fields", None) or {}
    if "x_sync_dir_suffix" not in fields or settings.x_sync_dir_suffix:
        return settings
    return settings.model_copy(update={"x_sync_dir_suffix": CALLBACK_SYNC_DIR_SUFFIX})


class WandbLoggerCallback(LoggerCallback):
    """Logs each trial to Weights & Biases from the driver: one run per trial (id = the
    trial id, name = the trial name, group = the experiment name), the trial's config as
    the run's config, every result's numbers at ``step = training_iteration``. Ray's
    ``WandbLoggerCallback``, same arguments.

    Args:
        project: the W&B project (or the ``WANDB_PROJECT_NAME`` environment variable).
        group: the W&B group; default: the experiment's folder name.
        api_key_file: a file holding the API key. api_key: the API key. Neither is needed
            offline.
        excludes: result and config keys not to log.
        log_config: also log each result's ``config`` (for PBT, whose configs change).
        upload_checkpoints: log each checkpoint the trial commits as a W&B artifact.
        save_checkpoints: deprecated alias of ``upload_checkpoints``.
        upload_timeout: seconds ``fit()`` waits at the end for runs to finish writing.
        video_kwargs / image_kwargs: passed to ``wandb.Video`` / ``wandb.Image`` for
            results holding 5-d / 3-d or 4-d arrays.
        **kwargs: passed to ``wandb.init`` (``mode="offline"``, ``dir=``, ``tags=``...);
            ``dir`` defaults to the trial's folder.

    Raises:
        ImportError: wandb is not installed (the message says what to install).
        ConfigError: an unknown ``mode``; from ``Tuner.fit()`` before trials start: no
            project, or online without an API key.
    """

    _exclude_results: ClassVar[list[str]] = ["done", "should_checkpoint"]
    AUTO_CONFIG_KEYS: ClassVar[list[str]] = ["trial_id", "experiment_tag", "node_ip", "experiment_id", "hostname",
                        "pid", "date"]
    """Result keys saved in ``wandb.config`` instead of logged."""

    def __init__(
        self,
        project: str | None = None,
        group: str | None = None,
        api_key_file: str | None = None,
        api_key: str | None = None,
        excludes: list[str] | None = None,
        log_config: bool = False,
        upload_checkpoints: bool = False,
        save_checkpoints: bool = False,
        upload_timeout: int = DEFAULT_SYNC_TIMEOUT,
        video_kwargs: dict[str, Any] | None = None,
        image_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._wandb = _import_wandb("WandbLoggerCallback")
        _check_mode(kwargs.get("mode"), "WandbLoggerCallback")
        if save_checkpoints:
            warnings.warn("`save_checkpoints` is deprecated. Use `upload_checkpoints` instead.",
                          DeprecationWarning, stacklevel=2)
            upload_checkpoints = save_checkpoints
        if excludes is not None and (isinstance(excludes, str)
                                     or not isinstance(excludes, Sequence)):
            raise ConfigError(f"WandbLoggerCallback(excludes={excludes!r}): give a list of "
                              f"result or config keys, e.g. excludes=['time_this_iter_s'].")
        self.project = project
        self.group = group
        self.api_key_path = api_key_file
        self.api_key = api_key
        self.excludes = list(excludes or [])
        self.log_config = log_config
        self.upload_checkpoints = upload_checkpoints
        self._upload_timeout = upload_timeout
        self.video_kwargs = video_kwargs or {}
        self.image_kwargs = image_kwargs or {}
        self.kwargs = kwargs
        self._loggers: dict[str, _TrialLogger] = {}
        self._finished: list[_TrialLogger] = []

    def setup(self, **info: object) -> None:
        """Called by ``Tuner.fit()`` before trials start: checks the key and project."""
        mode = self.kwargs.get("mode") or _env_mode("WandbLoggerCallback")
        _set_api_key(self._wandb, self.api_key_path, self.api_key, mode,
                     "WandbLoggerCallback")
        self.project = _get_wandb_project(self.project)
        if not self.project:
            raise ConfigError(
                "WandbLoggerCallback(project=None): pass the W&B project name as project=... "
                f"or set the {WANDB_PROJECT_ENV_VAR} environment variable."
            )
        if not self.group and os.environ.get(WANDB_GROUP_ENV_VAR):
            self.group = os.environ.get(WANDB_GROUP_ENV_VAR)

    def check_run(self) -> None:
        """In a Trainer's ``RunConfig``: refused (see ``refuse_in_train_run``)."""
        refuse_in_train_run(self, "setup_wandb")

    def log_trial_start(self, trial: TuneTrial) -> None:
        if trial.trial_id in self._loggers:
            return  # restarted or resumed: the same run goes on
        config = {k: v for k, v in dict(trial.config).items() if k != "callbacks"}
        exclude = self._exclude_results + self.excludes
        if not self.log_config:
            exclude = exclude + ["config"]
        path = str(trial.path)
        group = self.group or path.rstrip("/").rsplit("/", 2)[-2]
        config = _clean_log(config)
        config = {k: v for k, v in config.items() if k not in self.excludes}
        init_kwargs: dict[str, Any] = {
            "id": trial.trial_id, "name": str(getattr(trial, "name", trial.trial_id)),
            "resume": False, "allow_val_change": True, "group": group,
            "project": self.project, "config": config,
        }
        if os.path.isdir(path) or "://" not in path:
            os.makedirs(path, exist_ok=True)
            init_kwargs["dir"] = path
        init_kwargs.update(self.kwargs)
        # several runs live in this one process, one per trial: W&B's "create_new"
        init_kwargs["reinit"] = "create_new"
        if "settings" not in init_kwargs:  # the driver's console is tandem's, not a trial's
            init_kwargs["settings"] = self._wandb.Settings(console="off", quiet=True)
        init_kwargs["settings"] = _own_sync_dir(init_kwargs["settings"])
        thread = _TrialLogger(self._wandb, path, exclude, self.AUTO_CONFIG_KEYS, init_kwargs)
        self._loggers[trial.trial_id] = thread
        thread.start()

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._loggers:
            self.log_trial_start(trial)
        result = _clean_log(result, video_kwargs=self.video_kwargs,
                            image_kwargs=self.image_kwargs)
        self._loggers[trial.trial_id].queue.put(("result", result))

    def log_trial_save(self, trial: TuneTrial) -> None:
        if not self.upload_checkpoints or trial.trial_id not in self._loggers:
            return
        checkpoint = getattr(trial, "checkpoint", None)
        path = getattr(checkpoint, "path", None)
        if path and os.path.isdir(path):  # local checkpoints only, as Ray
            self._loggers[trial.trial_id].queue.put(("checkpoint", path))

    def log_trial_end(self, trial: TuneTrial, failed: bool = False) -> None:
        thread = self._loggers.pop(trial.trial_id, None)
        if thread is not None:
            thread.queue.put(("end", failed))
            self._finished.append(thread)

    def on_experiment_end(self, trials: Sequence[TuneTrial], **info: object) -> None:
        """Waits (up to ``upload_timeout`` s) for every run to finish writing."""
        for trial_id in list(self._loggers):  # runs of trials that did not end
            thread = self._loggers.pop(trial_id)
            thread.queue.put(("end", False))
            self._finished.append(thread)
        import time

        deadline = time.monotonic() + self._upload_timeout
        for thread in self._finished + list(self._loggers.values()):
            thread.join(max(0.0, deadline - time.monotonic()))
            if thread.is_alive():
                logger.warning("W&B run %s did not finish within upload_timeout=%s s.",
                               thread.name, self._upload_timeout)
        files = {t.sync_file for t in self._finished if t.sync_file and not t.is_alive()}
        open_files = _wait_closed(files, deadline)
        if open_files:
            logger.warning("W&B has not finished writing %s within upload_timeout=%s s.",
                           ", ".join(sorted(open_files)), self._upload_timeout)
        self._finished = []


def _wait_closed(files: set[str], deadline: float) -> set[str]:
    """Waits until W&B's service process (``wandb-core``, a child of this process) has closed
    every one of ``files``; answers those still open at ``deadline``.

    ``run.finish()`` only tells the service that the run is over: the service writes and
    closes the run's file afterwards. Ray's logging actor is a process of its own, whose exit
    waits for the service; here the runs live in the driver, whose service goes on, so the
    callback waits for the files, and a run read back after ``fit()`` is whole."""
    import time

    import psutil

    left = set(files)
    while left:
        held: set[str] = set()
        # every child of the driver (workers, the zygote) may end while this looks: one
        # that does is skipped, it cannot hold a run's file
        for p in psutil.Process().children(recursive=True):
            try:
                if p.name().startswith("wandb-core"):
                    held.update(os.path.realpath(f.path) for f in p.open_files())
            except psutil.Error:
                pass
        left = {f for f in left if os.path.realpath(f) in held}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)
    return left


def setup_wandb(
    config: dict[str, Any] | None = None,
    api_key: str | None = None,
    api_key_file: str | None = None,
    rank_zero_only: bool = True,
    **kwargs: Any,
) -> Any:
    """Starts a W&B run in this trial or train worker and returns it (Ray's
    ``setup_wandb``, same arguments).

    Defaults (each overridden by ``kwargs``, which go to ``wandb.init``): id = the trial id,
    name = the trial name, group = the experiment name, ``resume=True``, the project from
    ``WANDB_PROJECT_NAME``; in a trial, ``dir`` = the trial's folder. ``config`` becomes the
    run's config. In a train run with several workers, workers other than rank 0 get a
    disabled run (``rank_zero_only=False``: every worker gets a real one). End the run with
    ``run.finish()``.

    Raises:
        ImportError: wandb is not installed.
        ConfigError: an unknown ``mode``; online without an API key.
    """
    wandb = _import_wandb("setup_wandb")
    _check_mode(kwargs.get("mode"), "setup_wandb")
    ctx = train_session.get_context()
    if rank_zero_only and ctx.get_world_rank() != 0:
        return wandb.init(mode="disabled")
    mode = kwargs.get("mode") or _env_mode("setup_wandb")
    _set_api_key(wandb, api_key_file, api_key, mode, "setup_wandb")
    trial_id = kwargs.pop("trial_id", None) or ctx.trial_id
    trial_name = kwargs.pop("trial_name", None) or ctx.trial_name
    group = kwargs.pop("group", None) or ctx.get_experiment_name() or \
        os.environ.get(WANDB_GROUP_ENV_VAR)
    init_kwargs: dict[str, Any] = {
        "id": trial_id, "name": trial_name, "resume": True,
        "reinit": "finish_previous",  # Ray's reinit=True, in W&B's current spelling
        "allow_val_change": True, "config": _clean_log(dict(config or {})),
        "project": _get_wandb_project(kwargs.pop("project", None)), "group": group,
    }
    run_dir = ctx.trial_dir or ctx.get_run_path()  # beside the trial's / run's results
    if run_dir is not None and "://" not in run_dir:
        os.makedirs(run_dir, exist_ok=True)
        init_kwargs["dir"] = run_dir
    init_kwargs.update(kwargs)
    if isinstance(init_kwargs.get("config"), Mapping):
        init_kwargs["config"] = dict(init_kwargs["config"])
    run = wandb.init(**init_kwargs)

    def finish(failed: bool) -> None:  # as the process exit finishes it under Ray
        run.finish(exit_code=1 if failed else 0)

    train_session.at_worker_exit(finish)
    return run
