"""Job events on the server: the hub that fans them out to event streams (the writer that
puts them into the job store in batches is ``writer.py``).

The hub is fed from the job service's ``subscribe`` callback, which runs on each job's
thread; it never blocks it for long: it appends to a list and wakes the stream readers.

It also holds the questions jobs ask their submitter (``JobContext.ask``, e.g. a tuning
trial waiting for the tuner's verdict on a report): each is sent to the streams opened
with ``calls=true`` (the submitting client's), again to any such stream that opens later,
until one answers it (``POST /api/calls``). When no such stream is
open for ``CALL_UNATTENDED_S``, the job's questions get their default answer from then on
(the client is gone: the job goes on as if nobody followed it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from tandem.jobs.events import ReportRow
from tandem.jobs.spec import JobCall

logger = logging.getLogger(__name__)

#: How long a job's questions wait with no client following it to answer them.
CALL_UNATTENDED_S = 30.0


# --------------------------------------------------------------------------- the hub


@dataclass
class StreamItem:
    """One item for an event stream: ``kind`` is status, reports, event or end."""

    kind: str
    data: dict[str, Any]
    payload: Any = None  # the raw object of an "event" or a "call" (pickled by the stream)


class Subscriber:
    """One open event stream; items arrive on an asyncio queue of its event loop.
    ``answers_calls``: the stream of the client that answers the job's questions."""

    def __init__(self, loop: asyncio.AbstractEventLoop, answers_calls: bool = False) -> None:
        self.loop = loop
        self.answers_calls = answers_calls
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
    calls: dict[int, tuple[str, JobCall]] = field(default_factory=dict)  # unanswered
    unattended: bool = False  # no client answered in time: questions get their default
    timer: threading.Timer | None = None

    def answerers(self) -> list[Subscriber]:
        return [s for s in self.subscribers if s.answers_calls]

    def call_item(self, call_id: int, kind: str, call: JobCall, job_id: str) -> StreamItem:
        return StreamItem("call", {"job_id": job_id, "call_id": call_id, "kind": kind},
                          call.payload)


class EventHub:
    """Live jobs' reports and state, for event streams. Thread-safe.

    A job is live from submission until the writer has stored its end; then ``drop``
    forgets it and streams read it from the store.
    """

    def __init__(self, unattended_s: float = CALL_UNATTENDED_S) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, _LiveJob] = {}
        self._call_ids = itertools.count(1)
        self.unattended_s = unattended_s

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

    def reports(self, job_id: str, rows: list[ReportRow]) -> int:
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

    def event(self, job_id: str, kind: str, payload: object) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None or not live.subscribers:
                return
            item = StreamItem("event", {"job_id": job_id, "kind": kind}, payload)
            for s in live.subscribers:
                s.push(item)

    # -- questions a job asks its submitter -------------------------------------------
    def call(self, job_id: str, kind: str, call: JobCall) -> bool:
        """Sends a job's question to the client answering it; False if the job is not
        live here. Answered with the default at once when no client follows the job."""
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return False
            answerers = live.answerers()
            if not answerers and live.unattended:
                pass  # answered below, outside the lock
            else:
                call_id = next(self._call_ids)
                live.calls[call_id] = (kind, call)
                item = live.call_item(call_id, kind, call, job_id)
                for s in answerers:
                    s.push(item)
                if not answerers:
                    self._arm(job_id, live)
                return True
        call.answer_default()
        return True

    def answer(self, job_id: str, call_id: int, ok: bool, value: object) -> bool:
        """Passes the client's answer to the job; False if there is no such open question
        (answered already, or the job ended)."""
        with self._lock:
            live = self._jobs.get(job_id)
            got = live.calls.pop(call_id, None) if live is not None else None
        if got is None:
            return False
        got[1].reply(ok, value if ok else RuntimeError(f"the client answered: {value}"))
        return True

    def _arm(self, job_id: str, live: _LiveJob) -> None:
        """(Under the lock.) Starts the unattended timer of a job with open questions."""
        if live.timer is None and live.calls:
            live.timer = threading.Timer(self.unattended_s, self._unattended, (job_id,))
            live.timer.daemon = True
            live.timer.start()

    def _unattended(self, job_id: str) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return
            live.timer = None
            if live.answerers():
                return
            live.unattended = True
            calls, live.calls = list(live.calls.values()), {}
        if calls:
            logger.info("job %s: no client answered its %d question(s) in %.0f s; they get "
                        "their default answer", job_id, len(calls), self.unattended_s)
        for _, call in calls:
            call.answer_default()

    def _close_calls(self, live: _LiveJob) -> None:
        """(Under the lock.) The job ended: its questions need no answer any more."""
        live.calls.clear()
        if live.timer is not None:
            live.timer.cancel()
            live.timer = None

    def end(self, job_id: str, state: str, error: str | None) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return
            self._close_calls(live)
            live.state = state
            live.end = StreamItem("end", {"job_id": job_id, "state": state, "error": error})
            for s in live.subscribers:
                s.push(live.end)

    def drop(self, job_id: str) -> None:
        with self._lock:
            live = self._jobs.pop(job_id, None)
            if live is not None:
                self._close_calls(live)

    def subscribe(
        self, job_id: str, after_seq: int, loop: asyncio.AbstractEventLoop,
        answers_calls: bool = False,
    ) -> tuple[Subscriber, list[StreamItem]] | None:
        """A subscriber and the backlog it must send first; None if the job is not live.
        ``answers_calls``: the stream also carries the job's open questions."""
        with self._lock:
            live = self._jobs.get(job_id)
            if live is None:
                return None
            sub = Subscriber(loop, answers_calls)
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
                if answers_calls:
                    live.unattended = False
                    backlog.extend(live.call_item(cid, kind, call, job_id)
                                   for cid, (kind, call) in live.calls.items())
            return sub, backlog

    def unsubscribe(self, job_id: str, sub: Subscriber) -> None:
        with self._lock:
            live = self._jobs.get(job_id)
            if live is not None:
                live.subscribers.discard(sub)
                if not live.answerers():
                    self._arm(job_id, live)

    def num_reports(self, job_id: str) -> int | None:
        with self._lock:
            live = self._jobs.get(job_id)
            return None if live is None else live.first_seq + len(live.reports)


# The writer lives in writer.py; kept importable from here.
from tandem.server.writer import StoreWriter  # noqa: E402 - after EventHub, which it uses

__all__ = ["EventHub", "StoreWriter", "StreamItem", "Subscriber"]
