"""The worker-side API: ``report``, ``get_checkpoint``, ``get_context``, ``get_dataset_shard``.

These talk to the session of the worker process they are called in. The session is set
up by tandem before the train function starts; outside a worker, ``report`` raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tandem._core.errors import TandemError
from tandem.train._internal.contexts import LocalTrainContext
from tandem.train._internal.metrics import clean_metrics  # noqa: F401 - its old path
from tandem.train._internal.run_context import HAS_VALIDATION, TrainContext
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.v2.api.report_config import CheckpointConsistencyMode, CheckpointUploadMode
from tandem.train.v2.api.reported_checkpoint import ReportedCheckpoint, ReportedCheckpointStatus
from tandem.train.v2.api.validation_config import ValidationTaskConfig

if TYPE_CHECKING:
    from tandem.train._internal.worker_session import WorkerSession
    from tandem.train.api.preemption import PreemptionInfo

_session: WorkerSession | None = None
_DEFAULT_CONTEXT = LocalTrainContext(experiment_name=None)


class SessionMisuseError(TandemError, RuntimeError):
    """A worker-only function was called outside a training worker."""


def _set_session(session: WorkerSession | None) -> None:
    global _session
    _session = session


def get_session() -> WorkerSession | None:
    return _session


def _require(fn: str) -> WorkerSession:
    if _session is None:
        raise SessionMisuseError(
            f"tandem.train.{fn}() was called outside a training worker. Call it from inside "
            f"the train function you pass to a Trainer (train_loop_per_worker), which tandem "
            f"runs in each worker process."
        )
    return _session


def report(
    metrics: Mapping[str, object] | None = None,
    checkpoint: Checkpoint | None = None,
    checkpoint_dir_name: str | None = None,
    checkpoint_upload_mode: CheckpointUploadMode = CheckpointUploadMode.SYNC,
    delete_local_checkpoint_after_upload: bool | None = None,
    checkpoint_upload_fn: Callable[[Checkpoint, str], Checkpoint] | None = None,
    validation: bool | ValidationTaskConfig = False,
    **kwargs: object,
) -> None:
    """Reports metrics (and optionally a checkpoint) for this worker's current step.

    Every worker should call ``report`` the same number of times. Rank 0's metrics become
    the run's metrics; a checkpoint is copied to ``<run>/checkpoint_<iteration>/`` before
    this returns, and the run keeps it once every rank has reported that iteration.

    The 1.x keyword spelling ``report(loss=0.1, epoch=2)`` is accepted too (a keyword
    ``checkpoint=`` whose value is not a ``Checkpoint`` is then a metric of that name).

    Args:
        checkpoint_dir_name: the checkpoint's folder name in the run folder (default
            ``checkpoint_NNNNNN``, the iteration); unique per checkpoint, as in Ray.
        checkpoint_upload_mode: ``SYNC`` (default): copied before ``report`` returns;
            ``ASYNC``: also copied before it returns (tandem has no upload thread; the result
            is the same), and the local folder is deleted afterwards by default;
            ``NO_UPLOAD``: the checkpoint is already in storage and is registered where it is.
        delete_local_checkpoint_after_upload: delete the reported folder once copied (a
            folder inside the run folder is never deleted); default: only for ``ASYNC``.
        checkpoint_upload_fn: ``fn(checkpoint, checkpoint_dir_name) -> Checkpoint`` copies
            the checkpoint itself; the checkpoint it returns is the one registered.
        validation: ``True`` or a ``ValidationTaskConfig``: once committed, the checkpoint
            is validated by the trainer's ``ValidationConfig`` function (off this worker's
            path) and the metrics it returns are merged into this report's for it.

    Raises:
        TypeError: ``metrics`` is not a dict of strings to numbers, strings, lists or dicts,
            or a dict and keyword metrics were both given.
        ValueError: ``validation`` without a checkpoint, or without a ``validation_config``
            on the trainer.
    """
    session = _require("report")
    if kwargs or metrics is None:
        metrics, checkpoint = _keyword_metrics(metrics, checkpoint, kwargs)
    if validation is not False and not isinstance(validation, (bool, ValidationTaskConfig)):
        raise TypeError(
            f"train.report(validation={validation!r}): pass True, False or a "
            f"ValidationTaskConfig(fn_kwargs=..., timeout_s=...)."
        )
    if validation and not checkpoint:
        raise ValueError("Validation requires a checkpoint to be provided.")
    if validation and not session.context.metadata.get(HAS_VALIDATION):
        raise ValueError(
            "`validation_config` was not set on the trainer, but a validation was requested. "
            "Pass validation_config=ValidationConfig(fn=...) to the trainer, or report "
            "without validation=."
        )
    if not isinstance(checkpoint_upload_mode, CheckpointUploadMode):
        raise TypeError(
            f"train.report(checkpoint_upload_mode={checkpoint_upload_mode!r}): pass a "
            f"CheckpointUploadMode (SYNC, ASYNC or NO_UPLOAD)."
        )
    if checkpoint_dir_name is not None and (
            not isinstance(checkpoint_dir_name, str) or not checkpoint_dir_name
            or "/" in checkpoint_dir_name or checkpoint_dir_name in (".", "..")):
        raise ValueError(
            f"train.report(checkpoint_dir_name={checkpoint_dir_name!r}): pass a folder name "
            f"(no '/'), unique per checkpoint, e.g. f'epoch_{{epoch}}'."
        )
    if delete_local_checkpoint_after_upload is None:
        delete_local_checkpoint_after_upload = (
            checkpoint_upload_mode.default_delete_local_checkpoint_after_upload())
    session.report(metrics, checkpoint, validation=validation,
                   dir_name=checkpoint_dir_name,
                   upload=checkpoint_upload_mode is not CheckpointUploadMode.NO_UPLOAD,
                   delete_local=bool(delete_local_checkpoint_after_upload),
                   upload_fn=checkpoint_upload_fn)


def _keyword_metrics(
    metrics: object, checkpoint: object, kwargs: dict[str, object]
) -> tuple[dict[str, object], Checkpoint | None]:
    """``report(**metrics)`` (the 1.x API) as ``(metrics, checkpoint)``."""
    if metrics is not None:
        raise TypeError(
            f"train.report() got a metrics dict and keyword metrics ({', '.join(kwargs)}); "
            f"use one spelling: train.report({{'loss': 0.1}}) or train.report(loss=0.1)."
        )
    if checkpoint is not None and not isinstance(checkpoint, Checkpoint):
        kwargs["checkpoint"] = checkpoint
        checkpoint = None
    return kwargs, checkpoint


def at_worker_exit(hook: Callable[[bool], None]) -> None:
    """Calls ``hook(failed)`` once when this worker's train function has returned
    (``failed=False``) or raised (``True``), before the worker reports its end; outside a
    worker, at interpreter exit (``failed=False``). A hook's own error is printed, not
    raised. ``setup_mlflow``/``setup_wandb`` end their runs with it: a worker's ``atexit``
    handlers run only when its process exits, which a reused worker does after its last
    trial, not after each."""
    hooks = getattr(_session, "exit_hooks", None)
    if hooks is None:  # not in a worker (or the 1.x Trainer's worker)
        import atexit

        atexit.register(hook, False)
        return
    hooks.append(hook)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint to resume from (after a restart, or ``resume_from_checkpoint``), or None."""
    return _session.checkpoint if _session is not None else None


def get_context() -> TrainContext:
    """This worker's ranks and run (a ``DistributedTrainContext``); outside a worker, a
    ``LocalTrainContext``: one worker of rank 0, no run (its ``get_storage()`` raises, as
    Ray's)."""
    return _session.context if _session is not None else _DEFAULT_CONTEXT


def get_preemption_info() -> PreemptionInfo | None:
    """The imminent preemption of this run, or None (Ray Train's ``get_preemption_info``).

    When the job scheduler preempts the run for a higher-priority job, this returns a
    ``PreemptionInfo`` (its ``deadline_ms`` is when the workers are stopped): save a
    checkpoint with ``report(..., checkpoint=...)`` and keep training; the run is then
    stopped, re-queued and resumed from that checkpoint when capacity returns. Every rank
    must call it the same number of times: the n-th call returns the same value on every
    rank.

    Raises:
        SessionMisuseError: called outside a training worker.
    """
    return _require("get_preemption_info").preemption_info()


def get_dataset_shard(name: str | None = "train", *, dataset_name: str | None = None) -> Any:
    """This worker's shard of ``datasets[name]`` given to the trainer.

    ``name=None`` (the 1.x spelling) returns the shard of the only dataset given, or a dict
    of every dataset's shard when there are several. ``dataset_name=`` is the same as ``name``.

    Raises:
        KeyError: no dataset of that name was given; the message lists the names.
    """
    if dataset_name is not None:
        name = dataset_name
    return _require("get_dataset_shard").dataset_shard(name)


def now() -> float:
    return time.time()


def get_all_reported_checkpoints(
        consistency_mode: CheckpointConsistencyMode = CheckpointConsistencyMode.VALIDATED,
        timeout_s: float | None = None) -> list[ReportedCheckpoint]:
    """The checkpoints this run has reported and still keeps (oldest first, within
    ``CheckpointConfig(num_to_keep=...)``), each a ``ReportedCheckpoint`` with its metrics.

    It waits until the checkpoint of this worker's latest ``report`` is committed (every rank
    reported that iteration), as Ray's ``COMMITTED``/``VALIDATED`` modes do.

    Args:
        consistency_mode: a ``CheckpointConsistencyMode``: ``COMMITTED`` waits for the
            commit; ``VALIDATED`` (default) also waits until no validation requested with
            ``report(..., validation=...)`` is still running.
        timeout_s: give up after this many seconds (``TimeoutError``); None waits.

    Raises:
        SessionMisuseError: called outside a training worker.
    """
    if not isinstance(consistency_mode,
                                                       CheckpointConsistencyMode):
        raise TypeError(
            f"get_all_reported_checkpoints(consistency_mode={consistency_mode!r}): pass a "
            f"CheckpointConsistencyMode (COMMITTED or VALIDATED)."
        )
    session = _require("get_all_reported_checkpoints")
    validated = consistency_mode is CheckpointConsistencyMode.VALIDATED
    kept = session.call("reported_checkpoints", (session.iteration, validated), timeout_s)
    return [ReportedCheckpoint(Checkpoint(path), metrics, ReportedCheckpointStatus(status))
            for path, metrics, status in kept]
