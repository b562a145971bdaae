"""Train-layer errors."""

from __future__ import annotations

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

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:  # fields survive pickling (server, nested)
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
