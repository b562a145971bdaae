"""``ray.train.v2.api.validation_config``: checkpoint validation (Ray Train's alpha API).

Give a trainer ``validation_config=ValidationConfig(fn=...)`` and call
``train.report(metrics, checkpoint=..., validation=True)`` (or a ``ValidationTaskConfig``):
once that checkpoint is committed, the controller runs ``fn(checkpoint, **fn_kwargs)`` in a
process of its own, off the training workers' path (they go on training), one validation at
a time in report order. The dict it returns is merged into the metrics of that checkpoint
(``result.best_checkpoints``, ``train.get_all_reported_checkpoints()``, the top-k ranking of
``CheckpointConfig``). A function that raises, returns something other than a dict or runs
past ``timeout_s`` leaves the checkpoint's metrics as they were and marks it
``VALIDATION_FAILED`` / ``VALIDATION_TIMEOUT`` (logged with the cause); the run goes on, as in
Ray. ``fit()`` returns once every requested validation has ended.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from tandem._core.records import record

if TYPE_CHECKING:
    from tandem.train.api.checkpoint import Checkpoint

__all__ = ["ValidationConfig", "ValidationFn", "ValidationTaskConfig"]

# Ray's ray_remote_kwargs that mean something for a validation process of tandem's
SUPPORTED_REMOTE_KWARGS = ("max_retries", "retry_exceptions", "runtime_env")


class ValidationFn(Protocol):
    """Protocol for a function that validates a checkpoint: called with the checkpoint
    first and the task's ``fn_kwargs``; returns a dict of metrics."""

    def __call__(self, checkpoint: Checkpoint, **kwargs: object) -> dict[str, Any]: ...


@record(frozen=False)
class ValidationTaskConfig:
    """Configuration for one validation task, passed to ``train.report(validation=...)``.

    Args:
        fn_kwargs: keyword arguments for the validation function (they override the ones of
            ``ValidationConfig.task_config``); the checkpoint is always the first argument.
        timeout_s: the validation is stopped after this many seconds (its checkpoint is
            then ``VALIDATION_TIMEOUT``); None: no timeout.
    """

    fn_kwargs: dict[str, Any] | None = None
    timeout_s: float | None = None

    def __post_init__(self) -> None:
        if self.fn_kwargs is None:
            self.fn_kwargs = {}
        if not isinstance(self.fn_kwargs, dict) or not all(
                isinstance(k, str) for k in self.fn_kwargs):
            raise TypeError(
                f"ValidationTaskConfig(fn_kwargs={self.fn_kwargs!r}): pass a dict of keyword "
                f"argument names to values, e.g. fn_kwargs={{'split': 'val'}}."
            )
        if self.timeout_s is not None and (
                isinstance(self.timeout_s, bool) or not isinstance(self.timeout_s, (int, float))
                or not self.timeout_s > 0):
            raise ValueError(
                f"The `timeout_s` should be None or greater than zero, actual value: "
                f"{self.timeout_s!r}. Pass a number of seconds > 0, or None for no timeout."
            )


class ValidationConfig:
    """Configuration for validation, passed to the trainer (``validation_config=``).

    Args:
        fn: the validation function, ``fn(checkpoint, **fn_kwargs) -> dict`` of metrics.
        task_config: default ``ValidationTaskConfig`` (its ``fn_kwargs`` and ``timeout_s``);
            a ``ValidationTaskConfig`` given to ``train.report`` overrides it.
        ray_remote_kwargs: Ray's task options. tandem runs the function in a process of its
            own beside the run's controller, so it reads ``max_retries`` (times the process
            is started again when it dies; default 3, as a Ray task), ``retry_exceptions``
            (``True`` or a list of exception classes: the function is called again after
            such an error, within ``max_retries``) and ``runtime_env={"env_vars": {...}}``;
            other keys (resource requests) are refused, as there is no task to schedule.
    """

    def __init__(
        self,
        fn: ValidationFn,
        task_config: ValidationTaskConfig | None = None,
        ray_remote_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(
                f"ValidationConfig(fn={fn!r}): pass a function fn(checkpoint, **kwargs) that "
                f"returns a dict of metrics."
            )
        if task_config is not None and not isinstance(task_config, ValidationTaskConfig):
            raise TypeError(
                f"ValidationConfig(task_config={task_config!r}): pass a "
                f"ValidationTaskConfig(fn_kwargs=..., timeout_s=...) or None."
            )
        self.fn = fn
        self.task_config = task_config if task_config is not None else ValidationTaskConfig()
        self.ray_remote_kwargs = dict(ray_remote_kwargs or {})
        _check_remote_kwargs(self.ray_remote_kwargs)

    def __repr__(self) -> str:
        return (f"ValidationConfig(fn={getattr(self.fn, '__name__', self.fn)!r}, "
                f"task_config={self.task_config!r}, "
                f"ray_remote_kwargs={self.ray_remote_kwargs!r})")


def _check_remote_kwargs(kwargs: dict[str, Any]) -> None:
    unknown = sorted(k for k in kwargs if k not in SUPPORTED_REMOTE_KWARGS)
    if unknown:
        raise ValueError(
            f"ValidationConfig(ray_remote_kwargs=...): {', '.join(map(repr, unknown))} "
            f"cannot apply: tandem runs the validation function in a process of its own beside "
            f"the run's controller, not as a scheduled Ray task, so there are no resources to "
            f"request. Supported keys: {', '.join(SUPPORTED_REMOTE_KWARGS)}. Remove the "
            f"others (a function that needs a GPU can select it itself, e.g. torch.device)."
        )
    retries = kwargs.get("max_retries", 3)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < -1:
        raise ValueError(
            f"ValidationConfig(ray_remote_kwargs={{'max_retries': {retries!r}}}): pass an int "
            f">= 0 (or -1 for unlimited, as Ray)."
        )
    retry = kwargs.get("retry_exceptions", False)
    if not (isinstance(retry, bool) or (isinstance(retry, (list, tuple)) and all(
            isinstance(c, type) and issubclass(c, BaseException) for c in retry))):
        raise ValueError(
            f"ValidationConfig(ray_remote_kwargs={{'retry_exceptions': {retry!r}}}): pass True, "
            f"False or a list of exception classes."
        )
    env = kwargs.get("runtime_env")
    if env is not None:
        extra = sorted(set(env) - {"env_vars"}) if isinstance(env, dict) else None
        if extra is None or extra or not all(
                isinstance(k, str) and isinstance(v, str)
                for k, v in (env.get("env_vars") or {}).items()):
            raise ValueError(
                f"ValidationConfig(ray_remote_kwargs={{'runtime_env': {env!r}}}): the "
                f"validation process runs in the run's environment; only "
                f"runtime_env={{'env_vars': {{'NAME': 'value'}}}} applies to it."
            )


def task_spec_timeout(config: ValidationConfig, spec: bool | ValidationTaskConfig) -> float | None:
    """The timeout of one validation: the report's ``ValidationTaskConfig``'s, else the
    trainer's ``task_config``'s (as Ray)."""
    if isinstance(spec, ValidationTaskConfig):
        return spec.timeout_s
    return config.task_config.timeout_s


def merged_kwargs(config: ValidationConfig, spec: bool | ValidationTaskConfig) -> dict[str, Any]:
    """The validation function's keyword arguments: ``task_config.fn_kwargs`` overridden by
    the report's ``ValidationTaskConfig.fn_kwargs``."""
    merged = dict(config.task_config.fn_kwargs or {})
    if isinstance(spec, ValidationTaskConfig):
        merged.update(spec.fn_kwargs or {})
    return merged

