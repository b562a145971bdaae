"""Job events on the server: the hub that fans them out to event streams, and the writer
that puts them into the job store in batches.

Both are fed by ``TrainServer`` from the job service's ``subscribe`` callback, which runs
on each job's thread; neither blocks it for long: the hub appends to a list and wakes the
stream readers, the writer puts the event on a queue that one thread drains in batches
(one transaction per batch, so report ingestion runs at tens of thousands per second).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tandem.jobs.store import JobStore, ReportRecord, UsageSample

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- the hub


@dataclass
class StreamItem:
    """One item for an event stream: ``kind`` is status, reports, event or end."""

    kind: str
    data: dict[str, Any]
    payload: Any = None  # the raw object of an "event" (pickled by the stream)


class Subscriber:
    """One open event stream; items arrive on an asyncio queue of its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.queue: asyncio.Queue[StreamItem] = asyncio.Queue()

    def push(self, item: StreamItem) -> None:
        try:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)
        except RuntimeError:  # the loop is closed: the stream is gone
            pass


@dataclass
class _LiveJob:
    state: str
    first_seq: int  # seq of reports[0]
    reports: list[dict] = field(default_factory=list)
    subscribers: set[Subscriber] = field(default_factory=set)
    end: StreamItem | None = None


class EventHub:
    """Live jobs' reports and state, for event streams. Thread-safe.

    A job is live from submission until the writer has stored its end; then ``drop``
    forgets it and streams read it from the store.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, _LiveJob] = {}

    def open(self, job_id: str, state: str, next_seq: int = 0) -> None:
        with self._lock:
            self._jobs[job_id] = _LiveJob(state, next_seq)

    def status(self, job_id: str, state: str, at: float) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return
            live.state = state
            item = StreamItem("status", {"job_id": job_id, "state": state, "time": at})
            for s in live.subscribers:
                s.push(item)

    def reports(self, job_id: str, rows: list[dict]) -> int:
        """Appends a batch; returns the seq of its first row."""
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return -1
            first = live.first_seq + len(live.reports)
            live.reports.extend(rows)
            if live.subscribers:
                item = StreamItem("reports", {"job_id": job_id, "first_seq": first, "rows": rows})
                for s in live.subscribers:
                    s.push(item)
            return first

    def event(self, job_id: str, kind: str, payload: Any) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None or not live.subscribers:
                return
            item = StreamItem("event", {"job_id": job_id, "kind": kind}, payload)
            for s in live.subscribers:
                s.push(item)

    def end(self, job_id: str, state: str, error: str | None) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return
            live.state = state
            live.end = StreamItem("end", {"job_id": job_id, "state": state, "error": error})
            for s in live.subscribers:
                s.push(live.end)

    def drop(self, job_id: str) -> None:
        with self._lock:
            self._jobs.pop(job_id, None)

    def subscribe(
        self, job_id: str, after_seq: int, loop: asyncio.AbstractEventLoop
    ) -> tuple[Subscriber, list[StreamItem]] | None:
        """A subscriber and the backlog it must send first; None if the job is not live."""
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return None
            sub = Subscriber(loop)
            backlog = [StreamItem("status", {"job_id": job_id, "state": live.state})]
            start = max(0, after_seq + 1 - live.first_seq)
            if start < len(live.reports):
                backlog.append(StreamItem("reports", {
                    "job_id": job_id, "first_seq": live.first_seq + start,
                    "rows": live.reports[start:],
                }))
            if live.end is not None:
                backlog.append(live.end)
            else:
                live.subscribers.add(sub)
            return sub, backlog

    def unsubscribe(self, job_id: str, sub: Subscriber) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is not None:
                live.subscribers.discard(sub)

    def num_reports(self, job_id: str) -> int | None:
        with self._lock:
            live = self._jobs.get(job_id)
            return None if live is None else live.first_seq + len(live.reports)


# --------------------------------------------------------------------------- the writer


class StoreWriter:
    """One thread that applies job events to the store, in order, in batches.

    Ops: ``state`` (``set_state``), ``reports`` (``append_reports``; consecutive batches
    are merged into one call per job), ``update`` (``update_job``), ``usage``
    (``append_usage``) and ``call`` (a callback once everything before it is stored).
    """

    def __init__(self, store: JobStore, max_batch: int = 50_000) -> None:
        self.store = store
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._max_batch = max_batch
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="tandem-store-writer", daemon=True)
        self._thread.start()

    def put(self, op: tuple) -> None:
        if not self._closed:
            self._q.put(op)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until everything put so far is stored."""
        done = threading.Event()
        self.put(("call", done.set))
        return done.wait(timeout_s)

    def close(self, timeout_s: float = 30.0) -> None:
        """Stores what is queued, then stops; later ops are dropped."""
        if self._closed:
            return
        self.flush(timeout_s)
        self._closed = True
        self._q.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        while True:
            first = self._q.get()
            if first is None:
                return
            items = [first]
            while len(items) < self._max_batch:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    self._apply(items)
                    return
                items.append(item)
            self._apply(items)

    def _apply(self, items: list[tuple]) -> None:
        reports: dict[str, list[ReportRecord]] = {}
        usage: list[UsageSample] = []

        def flush_batched() -> None:
            for job_id, recs in reports.items():
                self._safe(self.store.append_reports, job_id, recs)
            reports.clear()
            if usage:
                self._safe(self.store.append_usage, list(usage))
                usage.clear()

        for op in items:
            kind = op[0]
            if kind == "reports":
                reports.setdefault(op[1], []).extend(op[2])
                continue
            if kind == "usage":
                usage.extend(op[1])
                continue
            flush_batched()
            if kind == "state":
                _, job_id, state, at, error, tb, reason = op
                self._safe(self.store.set_state, job_id, state, at, error,
                           traceback=tb, reason=reason)
            elif kind == "update":
                self._safe(self.store.update_job, op[1], **op[2])
            elif kind == "call":
                try:
                    op[1]()
                except Exception:
                    logger.exception("store writer callback failed")
        flush_batched()

    @staticmethod
    def _safe(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        try:
            fn(*args, **kwargs)
        except Exception:
            logger.exception("job store write failed (%s)", getattr(fn, "__name__", fn))
