"""What a job tells whoever follows it: its status and its events, as typed messages.

A job's events are one tagged union, ``JobEvent``: a frozen dataclass per kind, produced
where the event happens (the service for status changes and report batches, the train
controller for checkpoints and per-rank reports, ``JobContext.ask`` for questions) and
consumed with an exhaustive ``match`` (``typing.assert_never`` in the last case, so mypy
fails a consumer that forgets a new kind).

Whoever follows one job is a ``JobListener`` (``JobSpec.listener``); whoever follows every
job of a service is a ``JobSubscriber`` (``LocalJobService.subscribe``).

On the wire (a train server's event stream, a worker's ``job_event`` frames) an event is a
``(kind, payload)`` pair, as it always was: ``to_wire`` and ``from_wire`` convert at that
edge and nowhere else.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeAlias, TypeVar, assert_never

from tandem._core.records import record

__all__ = [
    "Asked",
    "Checkpointed",
    "HasPath",
    "JobCall",
    "JobEvent",
    "JobListener",
    "JobStatus",
    "JobSubscriber",
    "RankReported",
    "ReportEntry",
    "ReportRow",
    "Reported",
    "StatusChanged",
    "from_wire",
    "to_wire",
]


class JobStatus(str, enum.Enum):
    """``PENDING -> RUNNING -> (RESTARTING ->) FINISHED | FAILED | STOPPED``."""

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    FINISHED = "FINISHED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"

    @property
    def is_terminal(self) -> bool:
        return self in (JobStatus.FINISHED, JobStatus.FAILED, JobStatus.STOPPED)

    def __str__(self) -> str:
        return self.value


@record(frozen=False)
class JobCall:
    """A question a running job asks whoever submitted it, e.g. a tuning trial's worker
    asking the tuner whether to go on after a report.

    It reaches the submitter's job listener inside an ``Asked`` event: in this process
    directly, for a job on a train server through the server's event stream. The submitter
    answers it exactly once with ``call.reply(ok, value)`` (``ok=False``: ``value`` is an
    error to raise in the job). ``default`` is the answer the job gets when nobody follows
    it (no listener, or a train server's client gone).
    """

    payload: Any
    reply: Callable[[bool, Any], None]
    default: Any = None

    def answer_default(self) -> None:
        self.reply(True, self.default)


class HasPath(Protocol):
    """A checkpoint as the job layer sees it (``tandem.train.Checkpoint`` is one)."""

    @property
    def path(self) -> str: ...


ReportRow: TypeAlias = dict[str, Any]
"""One report row as ``JobHandle.results()`` gives it: metric name -> value."""

ReportEntry: TypeAlias = tuple[int, float, Mapping[str, Any], str | None]
"""One rank's report: ``(training_iteration, time_total_s, metrics, checkpoint path)``."""


@record
class StatusChanged:
    """The job moved to ``status`` (every state, PENDING through the terminal one)."""

    status: JobStatus
    kind: ClassVar[str] = "status"


@record
class Reported:
    """A batch of the job's (rank 0's) report rows, in order, as ``JobHandle.results()``
    gives them."""

    rows: list[ReportRow]
    kind: ClassVar[str] = "reports"


@record
class RankReported:
    """One rank's raw report batch (only for runs with ``emit_rank_reports``)."""

    rank: int
    batch: list[ReportEntry]
    kind: ClassVar[str] = "rank_reports"


@record
class Checkpointed:
    """A checkpoint was committed (every rank reported ``iteration``)."""

    iteration: int
    checkpoint: HasPath
    metrics: Mapping[str, Any]
    kind: ClassVar[str] = "checkpoint"


@record
class Asked:
    """The job asks its submitter ``question`` (an ``AskSubmitter`` kind, e.g.
    ``"verdict"``); the listener must answer ``call`` (see ``JobCall``)."""

    question: str
    call: JobCall


JobEvent: TypeAlias = StatusChanged | Reported | RankReported | Checkpointed | Asked
"""Everything a job tells its listeners."""

_J_contra = TypeVar("_J_contra", contravariant=True)


class JobListener(Protocol):
    """Follows one job (``JobSpec.listener``): called on the job's thread, in order, with
    every event of the job; it must return quickly and answer every ``Asked`` it gets."""

    def __call__(self, event: JobEvent, /) -> None: ...


class JobSubscriber(Protocol[_J_contra]):
    """Follows every job of a service (``LocalJobService.subscribe``): called with the
    service's record of the job and the event, on the job's thread, in order. ``Asked``
    events do not reach subscribers (a question has one answerer: the job's listener)."""

    def __call__(self, job: _J_contra, event: JobEvent, /) -> None: ...


def to_wire(event: StatusChanged | Reported | RankReported | Checkpointed) -> tuple[str, object]:
    """The ``(kind, payload)`` pair an event travels as (a question travels on its own,
    as a ``call``)."""
    match event:
        case StatusChanged(status=status):
            return event.kind, status
        case Reported(rows=rows):
            return event.kind, rows
        case RankReported(rank=rank, batch=batch):
            return event.kind, (rank, batch)
        case Checkpointed(iteration=iteration, checkpoint=checkpoint, metrics=metrics):
            return event.kind, (iteration, checkpoint, metrics)
        case _:
            assert_never(event)


_KINDS = ", ".join(repr(c.kind) for c in (StatusChanged, Reported, RankReported, Checkpointed))


def from_wire(kind: str, payload: Any) -> StatusChanged | Reported | RankReported | Checkpointed:
    """The event a ``(kind, payload)`` pair from ``to_wire`` stands for.

    Raises:
        ValueError: for a kind that is not a job event's, or a payload not of its shape.
    """
    try:
        if kind == StatusChanged.kind:
            return StatusChanged(JobStatus(payload))
        if kind == Reported.kind:
            return Reported(list(payload))
        if kind == RankReported.kind:
            rank, batch = payload
            return RankReported(int(rank), list(batch))
        if kind == Checkpointed.kind:
            iteration, checkpoint, metrics = payload
            return Checkpointed(int(iteration), checkpoint, metrics or {})
    except (TypeError, ValueError) as e:
        raise ValueError(f"a {kind!r} job event with a payload of the wrong shape "
                         f"({type(payload).__name__}): {e}") from e
    raise ValueError(f"unknown job event kind {kind!r}; the kinds are {_KINDS}")
