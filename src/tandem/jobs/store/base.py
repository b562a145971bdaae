"""The job store: what the job service remembers about every job.

A ``JobStore`` keeps five kinds of data:

* jobs (``JobRecord``): identity, state, priority, tags, timestamps, the opaque pickled
  spec plus a JSON description of it, the error and traceback of a failed job, and a
  JSON result summary (final metrics, checkpoint path, run path);
* state transitions (``TransitionRecord``), one per ``set_state`` call and one for
  the initial state at ``create_job``;
* reports (``ReportRecord``): the metrics each worker reported, with the checkpoint
  path that came with the report, if any;
* resource-use samples (``UsageSample``) per worker.

Implementations: ``InMemoryJobStore`` (``store/memory.py``) and ``SQLJobStore``
(``store/sql.py``, SQLite or PostgreSQL). ``open_store`` in ``store/__init__.py`` picks
one from a URL or path. ``tandem.jobs.testing.store_conformance`` is the test suite every
implementation must pass.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tandem._core.errors import JobNotFoundError, TandemError

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self from Python 3.11

__all__ = [
    "JOB_FIELDS",
    "TERMINAL_STATES",
    "DuplicateJobError",
    "DuplicateReportError",
    "JobRecord",
    "JobStore",
    "JobStoreError",
    "JobStoreUnavailableError",
    "ReportRecord",
    "TransitionRecord",
    "UsageSample",
]

#: States after which a job never runs again; ``set_state`` fills ``ended_at`` on them.
TERMINAL_STATES: frozenset[str] = frozenset({"FINISHED", "FAILED", "STOPPED"})
#: The state for which ``set_state`` fills ``started_at`` (if it is still unset).
RUNNING_STATE = "RUNNING"

Order = Literal["asc", "desc"]


class JobStoreError(TandemError):
    """Root of the errors a ``JobStore`` raises on purpose."""


class DuplicateJobError(JobStoreError, ValueError):
    """``create_job`` was given a ``job_id`` that the store already holds."""


class DuplicateReportError(JobStoreError, ValueError):
    """``append_reports`` was given a ``(job_id, seq)`` that the store already holds."""


class JobStoreUnavailableError(JobStoreError, RuntimeError):
    """The database stayed locked or unreachable for longer than the store's retry budget."""


class StoreFencedError(JobStoreError, RuntimeError):
    """A write through a store object whose owner epoch is no longer the store's: another
    owner took the store since (``JobStore.take_ownership``); nothing was written."""


# --------------------------------------------------------------------------- records


def _freeze_tags(tags: Iterable[str] | None) -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str):
        raise TypeError(
            f"tags must be a list of strings, got the string {tags!r}; "
            f"wrap it in a list: tags=[{tags!r}]"
        )
    out = tuple(tags)
    for t in out:
        if not isinstance(t, str):
            raise TypeError(f"every tag must be a str, got {t!r} ({type(t).__name__}) in {out!r}")
    return out


@dataclass(frozen=True)
class JobRecord:
    """One job as the store keeps it. Immutable: change a job with ``update_job``/``set_state``.

    Attributes:
        job_id: Unique id (``tandem._core.ids.new_id("job_")``).
        name: Human-readable name; not unique.
        state: ``"PENDING"``, ``"RUNNING"``, ``"RESTARTING"``, ``"FINISHED"``, ``"FAILED"``,
            ``"STOPPED"``. The store treats it as an opaque string, except that
            ``set_state`` fills ``started_at``/``ended_at`` (see there).
        submitted_at: Epoch seconds when the job was submitted.
        priority: Higher runs first; the store only keeps it.
        tags: Labels for filtering (``list_jobs(tag=...)``). Any iterable of str is
            accepted and kept as a tuple.
        started_at: Epoch seconds when the job first ran, or None.
        ended_at: Epoch seconds when the job reached a terminal state, or None.
        spec: The opaque (cloudpickled) job spec. ``list_jobs`` returns ``None`` here so
            listing never loads it; ``get_job`` returns it.
        spec_json: A JSON-able description of the spec, for listing and dashboards.
        error: A one-line error message of a failed job, or None.
        traceback: The full traceback text of a failed job, or None.
        result: JSON-able result summary (e.g. ``{"metrics": {...}, "checkpoint_path":
            ..., "path": ...}``), or None.
    """

    job_id: str
    name: str
    state: str
    submitted_at: float
    priority: int = 0
    tags: tuple[str, ...] = ()
    started_at: float | None = None
    ended_at: float | None = None
    spec: bytes | None = field(default=None, repr=False)
    spec_json: dict[str, Any] = field(default_factory=dict, hash=False)
    error: str | None = None
    traceback: str | None = field(default=None, repr=False)
    result: dict[str, Any] | None = field(default=None, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.job_id, str) or not self.job_id:
            raise ValueError(f"JobRecord.job_id must be a non-empty str, got {self.job_id!r}")
        if not isinstance(self.state, str) or not self.state:
            raise ValueError(f"JobRecord.state must be a non-empty str, got {self.state!r}")
        object.__setattr__(self, "tags", _freeze_tags(self.tags))
        if self.spec is not None and not isinstance(self.spec, (bytes, bytearray, memoryview)):
            raise TypeError(
                f"JobRecord.spec must be bytes (e.g. cloudpickle.dumps(spec)) or None, "
                f"got {type(self.spec).__name__}"
            )
        if self.spec is not None and not isinstance(self.spec, bytes):
            object.__setattr__(self, "spec", bytes(self.spec))

    @property
    def is_terminal(self) -> bool:
        """True when ``state`` is one of ``TERMINAL_STATES``."""
        return self.state in TERMINAL_STATES


@dataclass(frozen=True)
class ReportRecord:
    """One ``train.report(...)`` call as stored.

    Attributes:
        job_id: The job that reported.
        seq: Sequence number, unique per job and increasing in report order; the caller
            (the train controller) assigns it. ``get_reports`` orders by it.
        metrics: JSON-able metrics. NumPy scalars/arrays are converted to Python
            numbers/lists; NaN and infinities are kept.
        time: Epoch seconds of the report.
        rank: World rank of the reporting worker, or None when not per-worker.
        checkpoint_path: Path/URL of the checkpoint reported with the metrics, or None.
    """

    job_id: str
    seq: int
    metrics: dict[str, Any] = field(hash=False)
    time: float
    rank: int | None = None
    checkpoint_path: str | None = None


@dataclass(frozen=True)
class TransitionRecord:
    """A change of a job's state.

    Attributes:
        job_id: The job.
        from_state: The state before, or None for the initial state set by ``create_job``.
        to_state: The state after.
        time: Epoch seconds of the change (``set_state(at=...)``).
        reason: Free text (e.g. the error message), or None.
    """

    job_id: str
    from_state: str | None
    to_state: str
    time: float
    reason: str | None = None


@dataclass(frozen=True)
class UsageSample:
    """Resource use of one worker at one moment.

    Attributes:
        job_id: The job.
        rank: World rank of the worker.
        time: Epoch seconds of the sample.
        cpu_percent: CPU use in percent of one core (may exceed 100).
        rss_bytes: Resident memory of the worker process.
        gpu_util: GPU utilisation in percent, or None without a GPU.
        gpu_mem_bytes: GPU memory in use, or None without a GPU.
    """

    job_id: str
    rank: int
    time: float
    cpu_percent: float
    rss_bytes: int
    gpu_util: float | None = None
    gpu_mem_bytes: int | None = None


#: Fields ``update_job`` accepts (``state`` goes through ``set_state``; ``job_id`` never changes).
JOB_FIELDS: frozenset[str] = frozenset(
    {
        "name",
        "priority",
        "tags",
        "submitted_at",
        "started_at",
        "ended_at",
        "spec",
        "spec_json",
        "error",
        "traceback",
        "result",
    }
)


# --------------------------------------------------------------------------- JSON helpers


def _json_default(obj: object) -> object:
    # NumPy scalars and arrays (and torch tensors) reach metrics all the time.
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=repr)
    raise TypeError(
        f"cannot store a value of type {type(obj).__name__} ({obj!r:.80}) as JSON; "
        f"report plain numbers, strings, lists or dicts (convert it with float(...) or str(...))"
    )


_ENCODER = json.JSONEncoder(default=_json_default, separators=(",", ":"))

_orjson: Any
try:  # the server extra's fast JSON; the json module does the same, slower, without it
    import orjson as _orjson

    _ORJSON_OPTS = _orjson.OPT_PASSTHROUGH_DATACLASS | _orjson.OPT_PASSTHROUGH_DATETIME
except ImportError:  # pragma: no cover - orjson is in the server extra
    _orjson = None


def encode_json(value: object) -> str:
    """JSON text for ``value`` (NaN/inf kept, NumPy values converted). Raises TypeError.

    Every report row a train server stores and streams goes through here (twice), so it
    takes orjson's encoding when that is the json module's in value: orjson writes NaN and
    the infinities as ``null``, so a text with a ``null`` in it (rare in metrics) is encoded
    again by the json module, and so is anything orjson refuses (a non-string key, an int
    past 64 bits, a lone surrogate). The text may differ in spelling only (``0.00001`` for
    ``1e-05``, UTF-8 for ``\\u`` escapes): ``decode_json`` gives back the same value."""
    if _orjson is not None:
        try:
            out = _orjson.dumps(value, default=_json_default, option=_ORJSON_OPTS)
        except TypeError:
            pass
        else:
            if b"null" not in out:
                return out.decode()
    return _ENCODER.encode(value)


def decode_json(text: str | bytes | None) -> Any:
    """Inverse of ``encode_json``; ``None`` stays ``None``. (The json module's: orjson would
    read NaN as an error and an int past 64 bits as a float.)"""
    return None if text is None else json.loads(text)


def normalize_json(value: object) -> Any:
    """``value`` as it comes back from a JSON round trip (a deep, detached copy).

    ``InMemoryJobStore`` stores what this returns so it behaves like ``SQLJobStore``:
    tuples come back as lists, NumPy numbers as Python numbers, and a caller mutating its
    dict afterwards does not change the stored record.
    """
    if value is None:
        return None
    # Fast path for the common flat metrics dict of plain numbers and strings.
    if type(value) is dict and all(
        type(k) is str and (type(v) in (int, float, str, bool) or v is None)
        for k, v in value.items()
    ):
        return dict(value)
    return json.loads(encode_json(value))


def check_json_dict(value: object, what: str, *, allow_none: bool = False) -> None:
    """Raises TypeError unless ``value`` is a dict (or None when ``allow_none``)."""
    if value is None and allow_none:
        return
    if not isinstance(value, Mapping):
        allowed = "a dict or None" if allow_none else "a dict"
        raise TypeError(f"{what} must be {allowed}, got {type(value).__name__} ({value!r:.80})")


def check_update_fields(job_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Validates ``update_job`` keyword arguments; returns them normalised.

    Raises:
        ValueError: an unknown field, or ``state``/``job_id``.
        TypeError: a field of the wrong type.
    """
    unknown = set(fields) - JOB_FIELDS
    if unknown:
        hint = ""
        if "state" in unknown:
            hint = " Change the state with set_state(job_id, state, at=...), which records the transition."
        raise ValueError(
            f"update_job({job_id!r}) got unknown field(s) {sorted(unknown)}; "
            f"allowed fields are {sorted(JOB_FIELDS)}.{hint}"
        )
    out = dict(fields)
    if "tags" in out:
        out["tags"] = _freeze_tags(out["tags"])
    if "spec" in out and out["spec"] is not None:
        if not isinstance(out["spec"], (bytes, bytearray, memoryview)):
            raise TypeError(f"spec must be bytes or None, got {type(out['spec']).__name__}")
        out["spec"] = bytes(out["spec"])
    if "spec_json" in out:
        check_json_dict(out["spec_json"], "spec_json")
    if "result" in out:
        check_json_dict(out["result"], "result", allow_none=True)
    if "name" in out and not isinstance(out["name"], str):
        raise TypeError(f"name must be a str, got {out['name']!r}")
    if "priority" in out and (
        isinstance(out["priority"], bool) or not isinstance(out["priority"], int)
    ):
        raise TypeError(f"priority must be an int, got {out['priority']!r}")
    return out


def check_state_args(state: object, at: object) -> None:
    """Validates ``set_state``'s ``state`` and ``at``."""
    if not isinstance(state, str) or not state:
        raise ValueError(f"state must be a non-empty str such as 'RUNNING', got {state!r}")
    if isinstance(at, bool) or not isinstance(at, (int, float)):
        raise TypeError(
            f"set_state(at=...) takes epoch seconds as a float (time.time()), got {at!r}"
        )


def check_list_args(limit: int, offset: int, order: str) -> None:
    """Validates the paging arguments shared by the listing methods."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    if offset < 0:
        raise ValueError(f"offset must be >= 0, got {offset}")
    if order not in ("asc", "desc"):
        raise ValueError(f"order must be 'asc' or 'desc', got {order!r}")


def states_filter(states: str | Iterable[str] | None) -> tuple[str, ...] | None:
    """``list_jobs(states=...)`` as a tuple (a single string is one state)."""
    if states is None:
        return None
    if isinstance(states, str):
        return (states,)
    return tuple(states)


# --------------------------------------------------------------------------- the ABC


class JobStore(ABC):
    """Durable (or in-memory) record of jobs, their transitions, reports and resource use.

    Thread safety:
        Every method may be called from many threads of one process at once. Each call is
        atomic: a reader sees a job before or after an ``update_job``/``set_state``, never
        half of it, and an ``append_reports`` batch entirely or not at all.

    Processes:
        ``SQLJobStore`` on one SQLite file may be opened by several processes at once —
        the typical case is a server writing while ``tandem`` CLI processes read. Such use
        never fails with "database is locked": the store runs SQLite in WAL mode (readers
        never block the writer, nor the writer readers), sets a ``busy_timeout``, keeps
        every transaction short, takes the write lock up front (``BEGIN IMMEDIATE``) and
        retries a call that still meets a lock until its retry budget runs out (then
        ``JobStoreUnavailableError``). PostgreSQL gives the same guarantees natively.
        ``InMemoryJobStore`` lives in one process only.

    Ownership:
        The store does not validate state machines or schedule anything; the job service
        (``tandem.jobs``) owns the meaning of states and calls ``set_state`` in order. The
        store only fills ``started_at`` on the first ``"RUNNING"`` and ``ended_at`` on a
        terminal state (``TERMINAL_STATES``), when they are still unset.

    Fencing:
        A server that owns a shared store calls ``take_ownership`` once it holds the
        store's lock: the store's *owner epoch* goes up by one and every later write of
        that store object checks, in its own transaction, that the epoch is still the one
        it took. A stale owner (one whose lock was lost and taken by another server)
        therefore cannot write: its writes raise ``StoreFencedError``.

    Values:
        Dicts (``spec_json``, ``result``, report ``metrics``) are stored as JSON: what
        comes back is a fresh copy after a JSON round trip (tuples become lists, NumPy
        numbers become Python numbers, NaN and infinities survive). ``spec`` is opaque
        bytes. Records returned are immutable snapshots.

    Errors:
        ``JobNotFoundError`` for an unknown ``job_id`` in ``update_job``, ``set_state``,
        ``append_reports`` and ``append_usage``; ``DuplicateJobError`` /
        ``DuplicateReportError`` for a key given twice; ``ValueError``/``TypeError`` for
        bad arguments; ``JobStoreUnavailableError`` when the database stays unavailable.
        Reads of an unknown job return ``None`` or an empty list.
    """

    _owner_epoch_value: int = 0
    _fence_epoch: int | None = None

    # ----------------------------------------------------------------- jobs

    @abstractmethod
    def create_job(self, record: JobRecord) -> None:
        """Stores a new job and records its initial transition ``None -> record.state``.

        Called by the job service when a job is submitted.

        Args:
            record: The job. ``record.spec`` is stored as given.

        Raises:
            DuplicateJobError: ``record.job_id`` is already stored.
        """

    @abstractmethod
    def update_job(self, job_id: str, **fields: object) -> None:
        """Changes fields of a job other than its state.

        Args:
            job_id: The job.
            **fields: Any of ``JOB_FIELDS`` (``name``, ``priority``, ``tags``,
                ``submitted_at``, ``started_at``, ``ended_at``, ``spec``, ``spec_json``,
                ``error``, ``traceback``, ``result``). ``state`` is refused: use
                ``set_state`` so the transition is recorded.

        Raises:
            JobNotFoundError: no such job.
            ValueError: an unknown field or ``state``.
            TypeError: a value of the wrong type.
        """

    @abstractmethod
    def set_state(
        self,
        job_id: str,
        state: str,
        at: float,
        error: str | None = None,
        *,
        traceback: str | None = None,
        reason: str | None = None,
    ) -> JobRecord:
        """Moves a job to ``state`` and records the transition, atomically.

        Also sets ``started_at = at`` when ``state == "RUNNING"`` and ``started_at`` is
        unset, and ``ended_at = at`` when ``state`` is terminal and ``ended_at`` is unset.
        Setting the state a job already has still records a transition.

        Args:
            job_id: The job.
            state: The new state.
            at: Epoch seconds of the change.
            error: If given, stored as the job's ``error``.
            traceback: If given, stored as the job's ``traceback``.
            reason: Text for the transition record; defaults to ``error``.

        Returns:
            The job after the change, without ``spec`` (``spec=None``).

        Raises:
            JobNotFoundError: no such job.
        """

    @abstractmethod
    def get_job(self, job_id: str) -> JobRecord | None:
        """The job with its ``spec``, or ``None`` if unknown."""

    @abstractmethod
    def list_jobs(
        self,
        states: str | Iterable[str] | None = None,
        name: str | None = None,
        tag: str | None = None,
        limit: int = 100,
        offset: int = 0,
        order: Order = "desc",
    ) -> list[JobRecord]:
        """Jobs matching every given filter, ordered by ``(submitted_at, job_id)``.

        Listing never loads specs: each record has ``spec=None``.

        Args:
            states: Keep jobs in one of these states (one string is one state).
            name: Keep jobs with exactly this name.
            tag: Keep jobs that carry this tag.
            limit: At most this many records (``>= 0``).
            offset: Skip this many matching records first (``>= 0``).
            order: ``"desc"`` (newest first, the default) or ``"asc"``.

        Raises:
            ValueError: a negative ``limit``/``offset`` or another ``order``.
        """

    # ----------------------------------------------------------------- reports

    @abstractmethod
    def append_reports(self, job_id: str, reports: Sequence[ReportRecord]) -> None:
        """Stores a batch of reports of one job in one transaction.

        Designed for batches of ~100–1000; an empty batch is a no-op.

        Raises:
            JobNotFoundError: no such job.
            ValueError: a report's ``job_id`` differs from ``job_id``.
            DuplicateReportError: a ``seq`` already stored for the job (or twice in the
                batch); nothing of the batch is stored then.
        """

    @abstractmethod
    def get_reports(
        self,
        job_id: str,
        after_seq: int = -1,
        limit: int = 1000,
        *,
        with_checkpoint: bool = False,
    ) -> list[ReportRecord]:
        """Reports of a job with ``seq > after_seq``, by increasing ``seq``.

        Page through all reports by passing the last ``seq`` seen as ``after_seq``.

        Args:
            job_id: The job; unknown jobs have no reports.
            after_seq: Exclusive lower bound on ``seq``.
            limit: At most this many reports (``>= 0``).
            with_checkpoint: Only reports that carry a ``checkpoint_path``.
        """

    @abstractmethod
    def transitions(self, job_id: str) -> list[TransitionRecord]:
        """Every state change of a job in the order recorded (first: ``None -> initial``)."""

    # ----------------------------------------------------------------- usage

    @abstractmethod
    def append_usage(self, samples: Sequence[UsageSample]) -> None:
        """Stores resource-use samples (of one or several jobs) in one transaction.

        Raises:
            JobNotFoundError: a sample names an unknown job; nothing is stored then.
        """

    @abstractmethod
    def get_usage(
        self,
        job_id: str,
        *,
        rank: int | None = None,
        since: float | None = None,
        limit: int = 10_000,
    ) -> list[UsageSample]:
        """Samples of a job by increasing ``(time, rank)``.

        Args:
            job_id: The job; unknown jobs have no samples.
            rank: Only this worker's samples.
            since: Only samples with ``time > since``.
            limit: At most this many samples (``>= 0``), the earliest ones.
        """

    # ----------------------------------------------------------------- concrete helpers

    def checkpoint_paths(self, job_id: str) -> list[str]:
        """Every checkpoint path reported by a job, in report order (duplicates removed)."""
        seen: dict[str, None] = {}
        after = -1
        while True:
            page = self.get_reports(job_id, after_seq=after, limit=1000, with_checkpoint=True)
            for r in page:
                if r.checkpoint_path is not None:
                    seen.setdefault(r.checkpoint_path, None)
            if len(page) < 1000:
                return list(seen)
            after = page[-1].seq

    def require_job(self, job_id: str) -> JobRecord:
        """``get_job`` that raises ``JobNotFoundError`` instead of returning None."""
        job = self.get_job(job_id)
        if job is None:
            raise job_not_found(job_id, self)
        return job

    # ----------------------------------------------------------------- fencing

    def take_ownership(self) -> tuple[int, int]:
        """Makes this store object the store's owner: bumps the store's *owner epoch* and
        fences every later write of this object with the new one (a write after another
        owner bumped it again raises ``StoreFencedError`` and changes nothing).

        Called by the train server once it holds the store's lock, before it writes.

        Returns:
            ``(previous, new)`` epochs (0 for a store nobody owned before).
        """
        # A store in one process has one owner: the count is kept, nothing to fence.
        previous = self._owner_epoch_value
        self._owner_epoch_value = self._fence_epoch = previous + 1
        return previous, previous + 1

    def owner_epoch(self) -> int:
        """The store's current owner epoch (0 when nobody took ownership yet)."""
        return self._owner_epoch_value

    @property
    def fenced_epoch(self) -> int | None:
        """The epoch this object's writes are fenced with (None: not fenced)."""
        return self._fence_epoch

    def close(self) -> None:
        """Releases connections. Calls after ``close`` are not supported. Idempotent."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def job_not_found(job_id: str, store: JobStore) -> JobNotFoundError:
    """The ``JobNotFoundError`` every implementation raises for an unknown job."""
    return JobNotFoundError(
        f"no job with id {job_id!r} in {store!r}; create it with create_job() first, "
        f"or list known jobs with list_jobs() (or `tandem jobs list`)"
    )
