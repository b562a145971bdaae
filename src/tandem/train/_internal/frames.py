"""The frames between a train worker and its driver, as typed messages.

A frame is one of the frozen dataclasses below; code on either side builds and matches
these (``match`` with ``typing.assert_never``: mypy fails a dispatch that misses a kind).
On the connection a frame travels as the tuple it always was (the cluster pickles it after
the HMAC handshake of ``tandem.cluster``; nothing here changes what is authenticated or
when): ``encode`` makes that tuple and ``decode_worker_frame`` / ``decode_driver_frame``
read it back, the only code that knows the tuples' layout.

Worker -> driver (``WorkerFrame``):

    ReportsFrame(rank, batch)    ("reports", rank, [(iteration, time_total_s, metrics, path | None), ...])
    DoneFrame(rank, value)       ("done", rank, return_value_bytes | None)
    ErrorFrame(rank, info)       ("error", rank, ErrorInfo)
    CallFrame(call_id, method, payload)   ("call", call_id, method, payload)
    ReadyFrame(rank)             ("ready", rank)          a 1.x worker group's instance exists
    ResultFrame(call_id, ok, value)       ("result", call_id, ok, value_bytes | ErrorInfo)
    ValidateFrame(rank, iteration, spec)  ("validate", rank, (iteration, spec))  sent before
                                 the report whose checkpoint ``train.report(validation=)`` names

and what the cluster says of the worker's connection and process (``tandem.cluster.base``):
``Connected(pid)`` (``("__connected__", pid)``: the worker's process connected, or a warm
worker was assigned), ``StreamEnded`` (``("__eof__",)``) and ``ProcessExited(returncode)``
(``("__exit__", code)``).

Driver -> worker (``DriverFrame``): ``ReplyFrame(call_id, ok, value)`` answers a call;
``NoticeFrame(topic, payload)`` goes to the handler the worker registered for ``topic``
(nested jobs' events, the 1.x worker group's commands).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeAlias, assert_never

from tandem._core.records import record
from tandem.jobs.spec import PreemptionRequest

__all__ = [
    "CallFrame",
    "ControllerItem",
    "Connected",
    "DoneFrame",
    "DriverFrame",
    "ErrorFrame",
    "ErrorInfo",
    "NoticeFrame",
    "PreemptRequested",
    "ProcessExited",
    "ReadyFrame",
    "ReplyFrame",
    "ReportBatch",
    "ReportsFrame",
    "ResultFrame",
    "StopRequested",
    "StreamEnded",
    "ValidateFrame",
    "ValidationsDone",
    "WorkerFrame",
    "decode_driver_frame",
    "decode_worker_frame",
    "encode",
]


@record
class ErrorInfo:
    """A worker's exception, in a form that always crosses the process boundary."""

    exc_type: str
    message: str
    traceback: str
    pickled: bytes | None = None


ReportBatch: TypeAlias = list[tuple[int, float, Mapping[str, Any], str | None]]
"""A rank's reports: ``(training_iteration, time_total_s, metrics, checkpoint path)``."""


@record(slots=True)
class ReportsFrame:
    rank: int
    batch: ReportBatch


@record(slots=True)
class DoneFrame:
    """The train function returned ``value`` (cloudpickled; None for ``None``)."""

    rank: int
    value: bytes | None


@record(slots=True)
class ErrorFrame:
    rank: int
    info: ErrorInfo


@record(slots=True)
class CallFrame:
    """A request to the driver; answered by a ``ReplyFrame`` with the same ``call_id``."""

    call_id: int
    method: str
    payload: Any


@record(slots=True)
class ReadyFrame:
    """A 1.x worker group's worker built its instance (``Trainer.to_worker_group``)."""

    rank: int


@record(slots=True)
class ResultFrame:
    """A 1.x worker group's answer to an ``execute`` notice: ``value`` is the cloudpickled
    return value, or an ``ErrorInfo`` when ``ok`` is False."""

    call_id: int
    ok: bool
    value: Any


@record(slots=True)
class ValidateFrame:
    """``train.report(..., validation=spec)``: validate the checkpoint of report
    ``iteration`` (sent just before that report)."""

    rank: int
    iteration: int
    spec: Any


@record(slots=True)
class Connected:
    """The worker's process connected to the driver (or a warm one was given this task)."""

    pid: int | None


@record(slots=True)
class StreamEnded:
    """The worker's connection closed (the cluster's ``("__eof__",)``)."""


@record(slots=True)
class ProcessExited:
    """The worker's process ended (negative: killed by that signal)."""

    returncode: int | None


WorkerFrame: TypeAlias = (ReportsFrame | DoneFrame | ErrorFrame | CallFrame | ReadyFrame
                          | ResultFrame | ValidateFrame | Connected | StreamEnded
                          | ProcessExited)


@record(slots=True)
class StopRequested:
    """The controller's own queue item: ``TrainController.stop()`` was called."""


@record(slots=True)
class PreemptRequested:
    """The controller's own queue item: the service preempts the job."""

    request: PreemptionRequest


@record(slots=True)
class ValidationsDone:
    """The controller's own queue item: checkpoint validations finished (their metrics
    are to be applied)."""


ControllerItem: TypeAlias = WorkerFrame | StopRequested | PreemptRequested | ValidationsDone
"""What the train controller's loop handles."""


@record(slots=True)
class ReplyFrame:
    call_id: int
    ok: bool
    value: Any


@record(slots=True)
class NoticeFrame:
    """A frame for the handler the worker registered for ``topic``
    (``WorkerSession.on(topic, handler)``)."""

    topic: str
    payload: Any


DriverFrame: TypeAlias = ReplyFrame | NoticeFrame


def encode(frame: WorkerFrame | DriverFrame) -> tuple[object, ...]:
    """The tuple ``frame`` travels as."""
    match frame:
        case ReportsFrame(rank=rank, batch=batch):
            return ("reports", rank, batch)
        case DoneFrame(rank=rank, value=value):
            return ("done", rank, value)
        case ErrorFrame(rank=rank, info=info):
            return ("error", rank, info)
        case CallFrame(call_id=call_id, method=method, payload=payload):
            return ("call", call_id, method, payload)
        case ReadyFrame(rank=rank):
            return ("ready", rank)
        case ResultFrame(call_id=call_id, ok=ok, value=value):
            return ("result", call_id, ok, value)
        case ValidateFrame(rank=rank, iteration=iteration, spec=spec):
            return ("validate", rank, (iteration, spec))
        case Connected(pid=pid):
            return ("__connected__", pid)
        case StreamEnded():
            return ("__eof__",)
        case ProcessExited(returncode=code):
            return ("__exit__", code)
        case ReplyFrame(call_id=call_id, ok=ok, value=value):
            return ("reply", call_id, ok, value)
        case NoticeFrame(topic=topic, payload=payload):
            return (topic, payload)
        case _:
            assert_never(frame)


def _shape_error(side: str, raw: object) -> ValueError:
    what = repr(raw[0]) if isinstance(raw, tuple) and raw else type(raw).__name__
    return ValueError(f"not a {side} frame: {what} (of {type(raw).__name__}); a tandem peer "
                      f"of another version, or a bug")


def decode_worker_frame(raw: object) -> WorkerFrame:
    """The frame a worker's tuple (or the cluster's end-of-stream tuple) stands for.

    Raises:
        ValueError: ``raw`` is not a worker frame.
    """
    match raw:
        case ("reports", int() as rank, list() as batch):
            return ReportsFrame(rank, batch)
        case ("done", int() as rank, (bytes() | None) as value):
            return DoneFrame(rank, value)
        case ("error", int() as rank, ErrorInfo() as info):
            return ErrorFrame(rank, info)
        case ("call", int() as call_id, str() as method, payload):
            return CallFrame(call_id, method, payload)
        case ("ready", int() as rank):
            return ReadyFrame(rank)
        case ("result", int() as call_id, bool() as ok, value):
            return ResultFrame(call_id, ok, value)
        case ("validate", int() as rank, (int() as iteration, spec)):
            return ValidateFrame(rank, iteration, spec)
        case ("__connected__", (int() | None) as pid):
            return Connected(pid)
        case ("__eof__",):
            return StreamEnded()
        case ("__exit__", (int() | None) as code):
            return ProcessExited(code)
    raise _shape_error("worker", raw)


def decode_driver_frame(raw: object) -> DriverFrame:
    """The frame a driver's tuple stands for.

    Raises:
        ValueError: ``raw`` is not a driver frame.
    """
    match raw:
        case ("reply", int() as call_id, bool() as ok, value):
            return ReplyFrame(call_id, ok, value)
        case (str() as topic, payload) if topic != "reply":
            return NoticeFrame(topic, payload)
    raise _shape_error("driver", raw)
