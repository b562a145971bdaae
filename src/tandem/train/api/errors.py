"""Train-layer errors."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tandem._core.errors import TandemError


class TrainingFailedError(TandemError, RuntimeError):
    """A run failed and its restart budget is spent.

    Attributes:
        rank: the rank whose failure ended the run (None if not a single rank's fault).
        exc_type: the worker's exception type name (e.g. ``"ValueError"``), or a death cause.
        exc_message: the worker's exception message.
        worker_traceback: the worker's formatted traceback, as the worker printed it.
        cause: the worker's original exception object, when it could be sent back.
        num_failures: how many failures the run saw in total.
    """

    def __init__(
        self,
        message: str,
        *,
        rank: int | None = None,
        exc_type: str | None = None,
        exc_message: str | None = None,
        worker_traceback: str | None = None,
        cause: BaseException | None = None,
        num_failures: int = 1,
    ) -> None:
        super().__init__(message)
        self.rank = rank
        self.exc_type = exc_type
        self.exc_message = exc_message
        self.worker_traceback = worker_traceback
        self.cause = cause
        self.num_failures = num_failures

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:  # fields survive pickling (server, nested)
        return (
            _rebuild,
            (str(self), self.rank, self.exc_type, self.exc_message, self.worker_traceback,
             None, self.num_failures),
        )


def _rebuild(msg: str, rank: int | None, exc_type: str | None, exc_message: str | None,
             tb: str | None, cause: BaseException | None, n: int) -> TrainingFailedError:
    return TrainingFailedError(
        msg, rank=rank, exc_type=exc_type, exc_message=exc_message, worker_traceback=tb,
        cause=cause, num_failures=n,
    )


WORKER_ERRORS_HEADER = "Training failed due to worker errors:"
"""The first line of a :class:`WorkerGroupError`'s message (Ray's words); what failed follows."""


class WorkerGroupError(TrainingFailedError):
    """A run failed because a worker raised or died and the restart budget is spent
    (Ray's ``ray.train.WorkerGroupError``).

    Args:
        error_message: What failed, in words (the rank, its exception, the budget).
        worker_failures: rank -> the exception that rank raised.
    """

    def __init__(self, error_message: str, worker_failures: dict[int, BaseException],
                 **fields: Any) -> None:
        super().__init__(WORKER_ERRORS_HEADER + "\n" + error_message, **fields)
        self._error_message = error_message
        self.worker_failures = dict(worker_failures)

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        # the workers' exception objects may not pickle: they travel as their type and text
        failures = {rank: RuntimeError(f"{type(e).__name__}: {e}")
                    for rank, e in self.worker_failures.items()}
        return (_rebuild_group, (type(self), self._error_message, failures, self.rank,
                                 self.exc_type, self.exc_message, self.worker_traceback,
                                 self.num_failures))


class NCCLHangError(WorkerGroupError):
    """Ray raises it when NCCL's RAS subsystem finds a hung collective on GPUs. tandem has
    no NCCL RAS monitor: a hung gang is ended by ``FailureConfig`` / the run's timeouts and
    raises :class:`WorkerGroupError`, so this subclass is never raised here; catching it
    is harmless, catch ``WorkerGroupError`` to handle worker failures."""


class ControllerError(TrainingFailedError):
    """A run failed because tandem's controller itself failed (not a worker); Ray's
    ``ray.train.ControllerError``.

    Args:
        controller_failure: The exception the controller raised.
    """

    def __init__(self, controller_failure: BaseException) -> None:
        super().__init__("Training failed due to controller error:\n" + str(controller_failure),
                         exc_type=type(controller_failure).__name__,
                         exc_message=str(controller_failure), cause=controller_failure)
        self.controller_failure = controller_failure
        self.with_traceback(controller_failure.__traceback__)

    def __reduce__(self) -> tuple[Callable[..., object], tuple[object, ...]]:
        failure = self.controller_failure
        try:
            import pickle

            pickle.dumps(failure)
        except Exception:  # noqa: BLE001 - sent as its type and text
            failure = RuntimeError(f"{type(failure).__name__}: {failure}")
        return (type(self), (failure,))


def _rebuild_group(cls: type[WorkerGroupError], message: str,
                   failures: dict[int, BaseException], rank: int | None, exc_type: str | None,
                   exc_message: str | None, tb: str | None, n: int) -> WorkerGroupError:
    return cls(message, failures, rank=rank, exc_type=exc_type, exc_message=exc_message,
               worker_traceback=tb, num_failures=n)
