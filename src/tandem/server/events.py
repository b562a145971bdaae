"""Job events on the server: the hub that fans them out to event streams (the writer that
puts them into the job store in batches is ``writer.py``).

The hub is fed from the job service's ``subscribe`` callback, which runs on each job's
thread; it never blocks it for long: it appends to a list and wakes the stream readers.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

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


# The writer lives in writer.py; kept importable from here.
from tandem.server.writer import StoreWriter

__all__ = ["EventHub", "StoreWriter", "StreamItem", "Subscriber"]
