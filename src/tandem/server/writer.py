"""``StoreWriter``: one thread that applies job events to the store, in order, in batches —
and that loses none of them when the store is down.

Ops: ``state`` (``set_state``), ``reports`` (``append_reports``; consecutive batches are
merged into one call per job), ``update`` (``update_job``), ``usage`` (``append_usage``)
and ``call`` (a callback run once everything put before it is stored).

When a write fails because the store is unreachable (``JobStoreUnavailableError``), the
writer enters an *outage*: that op and every later one wait, in order, in memory and in an
append-only journal file beside the server (``journal.jsonl``, fsynced), and the writer
retries every ``retry_interval_s``. When the store answers again the waiting ops are
written in order and the journal is emptied. A server that stops (or dies) during an
outage leaves the journal behind; the next server on the same folder replays it before
anything else (``replay_journal``), so a job whose end was only journaled is not re-run.

Replays are idempotent: a report batch that was partly stored is completed, not doubled;
a state change already in the store is not recorded twice (a write cut off by the outage
may have committed).

Ownership: before each batch (and every ``check_interval_s`` when idle) the writer asks
``check_owner`` whether the server still provably holds its store; when it cannot, that
is an outage too (nothing is written, the server starts no job) until ``on_reconnect``
takes the lock again. Each journaled op carries the owner epoch it was made under, and a
journal is replayed only by the next owner of the same store (``replay_journal``). When
another server took the store meanwhile (``StoreDeposedError``, or a write refused with
``StoreFencedError``), the writer is *deposed*: what waits is dropped (the journal is
moved aside, never replayed) and nothing is written again.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from tandem._core.errors import JobNotFoundError
from tandem.jobs.store import (
    DuplicateReportError,
    JobStore,
    JobStoreUnavailableError,
    ReportRecord,
    StoreFencedError,
    UsageSample,
)
from tandem.jobs.store.base import decode_json, encode_json

__all__ = ["StoreWriter", "read_journal", "replay_journal"]

logger = logging.getLogger(__name__)

Op = tuple[Any, ...]


class _Outage(Exception):
    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(str(error))
        self.index = index
        self.error = error


class _Deposed(Exception):
    """A write was refused: another server owns the store now."""


# --------------------------------------------------------------------------- journal


def _op_to_json(op: Op, epoch: int | None = None) -> str | None:
    kind = op[0]
    if kind == "state":
        _, job_id, state, at, error, tb, reason = op
        d: dict[str, Any] = {"op": "state", "job_id": job_id, "state": state, "at": at,
                             "error": error, "traceback": tb, "reason": reason}
    elif kind == "reports":
        d = {"op": "reports", "job_id": op[1],
             "rows": [[r.seq, r.metrics, r.time, r.rank, r.checkpoint_path] for r in op[2]]}
    elif kind == "update":
        d = {"op": "update", "job_id": op[1], "fields": op[2]}
    elif kind == "usage":
        d = {"op": "usage", "samples": [[s.job_id, s.rank, s.time, s.cpu_percent, s.rss_bytes,
                                         s.gpu_util, s.gpu_mem_bytes] for s in op[1]]}
    else:
        return None  # callbacks live in this process only
    if epoch is not None:
        d["epoch"] = epoch
    try:
        return encode_json(d)
    except (TypeError, ValueError):
        logger.exception("cannot journal a %s op of job %s", kind, d.get("job_id"))
        return None


def _op_from_json(d: dict[str, Any]) -> Op:
    kind = d["op"]
    if kind == "state":
        return ("state", d["job_id"], d["state"], d["at"], d["error"], d["traceback"],
                d["reason"])
    if kind == "reports":
        job_id = d["job_id"]
        return ("reports", job_id, [ReportRecord(job_id, s, m, t, r, c)
                                    for s, m, t, r, c in d["rows"]])
    if kind == "update":
        return ("update", d["job_id"], d["fields"])
    if kind == "usage":
        return ("usage", [UsageSample(*row) for row in d["samples"]])
    raise ValueError(f"unknown journal op {kind!r}")


def read_journal(path: str, epochs: set[int] | None = None) -> list[Op]:
    """The ops in a journal, in order; a torn last line (a crash mid-write) is skipped.
    ``epochs`` collects the owner epochs the ops were made under."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().split("\n")
    except FileNotFoundError:
        return []
    ops = []
    for n, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            d = decode_json(line)
            ops.append(_op_from_json(d))
            if epochs is not None and d.get("epoch") is not None:
                epochs.add(int(d["epoch"]))
        except (ValueError, KeyError, TypeError) as e:
            if n >= len(lines) - 2:  # the last line: cut off by a crash
                logger.warning("journal %s: skipped a torn last line (%s)", path, e)
                continue
            raise ValueError(f"the journal {path} is damaged at line {n + 1}: {e}") from e
    return ops


def replay_journal(store: JobStore, path: str, owner_epoch: int | None = None) -> int:
    """Writes a journal left by an earlier server into the store, in order, then empties
    it; returns the number of ops replayed.

    Args:
        owner_epoch: the epoch of the store's previous owner. A journal made under
            another epoch is stale (another server owned the store since and ran its
            jobs): it is moved aside (``<path>.stale``), not replayed.

    Raises:
        JobStoreUnavailableError: the store is still down (the journal is kept).
        ValueError: the journal is damaged before its last line.
    """
    epochs: set[int] = set()
    ops = read_journal(path, epochs)
    if ops and owner_epoch is not None and epochs and epochs != {owner_epoch}:
        os.replace(path, path + ".stale")
        logger.warning(
            "the journal %s holds %d job event(s) of owner epoch %s, but the store was "
            "owned by epoch %s since: another server ran those jobs; the events are not "
            "replayed (kept in %s.stale)", path, len(ops), sorted(epochs), owner_epoch, path)
        return 0
    if ops:
        applier = _Applier(store)
        try:
            applier.apply(ops, replaying=True)
        except _Outage as o:
            raise o.error from None
        except _Deposed as d:
            raise StoreFencedError(str(d)) from None
        logger.warning("replayed %d job event(s) from the journal %s", len(ops), path)
    if os.path.exists(path):
        os.unlink(path)
    return len(ops)


class _Journal:
    def __init__(self, path: str, epoch: int | None = None) -> None:
        self.path = path
        self.epoch = epoch
        self._f: Any = None
        self.count = 0

    def append(self, ops: list[Op]) -> None:
        lines = [t for t in (_op_to_json(op, self.epoch) for op in ops) if t is not None]
        if not lines:
            return
        if self._f is None:
            self._f = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - kept open
        self._f.write("\n".join(lines) + "\n")
        self._f.flush()
        os.fsync(self._f.fileno())
        self.count += len(lines)

    def clear(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.count = 0

    def close(self) -> None:
        if self._f is not None:
            self._f.close()
            self._f = None

    def set_aside(self) -> str | None:
        """Moves the journal away for good (a deposed server's events are stale)."""
        self.close()
        self.count = 0
        try:
            os.replace(self.path, self.path + ".stale")
        except FileNotFoundError:
            return None
        return self.path + ".stale"


# --------------------------------------------------------------------------- applying


class _Applier:
    """Applies a list of ops to the store in order (reports and usage merged)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store

    def apply(self, ops: list[Op], replaying: bool = False) -> None:
        """Raises ``_Outage(i)``: ops[i:] are not (certainly) stored."""
        reports: dict[str, list[ReportRecord]] = {}
        usage: list[UsageSample] = []
        group_start = 0

        def flush_batched() -> None:
            try:
                for job_id, recs in reports.items():
                    self._guard(self._append_reports, job_id, recs)
                if usage:
                    self._guard(self.store.append_usage, list(usage))
            except JobStoreUnavailableError as e:
                raise _Outage(group_start, e) from None
            except StoreFencedError as e:
                raise _Deposed(str(e)) from None
            reports.clear()
            usage.clear()

        for i, op in enumerate(ops):
            kind = op[0]
            if kind in ("reports", "usage"):
                if not reports and not usage:
                    group_start = i
                if kind == "reports":
                    reports.setdefault(op[1], []).extend(op[2])
                else:
                    usage.extend(op[1])
                continue
            flush_batched()
            try:
                if kind == "state":
                    _, job_id, state, at, error, tb, reason = op
                    if not (replaying and self._already(job_id, state, at)):
                        self._guard(self.store.set_state, job_id, state, at, error,
                                    traceback=tb, reason=reason)
                elif kind == "update":
                    self._guard(self.store.update_job, op[1], **op[2])
                elif kind == "call":
                    try:
                        op[1]()
                    except Exception:
                        logger.exception("store writer callback failed")
            except JobStoreUnavailableError as e:
                raise _Outage(i, e) from None
            except StoreFencedError as e:
                raise _Deposed(str(e)) from None
        flush_batched()

    def _already(self, job_id: str, state: str, at: float) -> bool:
        """A state change the store already holds (written just before the outage)."""
        rec = self.store.get_job(job_id)
        if rec is None or rec.state != state:
            return False
        last = self.store.transitions(job_id)[-1:]
        return bool(last) and last[0].to_state == state and last[0].time == at

    def _append_reports(self, job_id: str, recs: list[ReportRecord]) -> None:
        try:
            self.store.append_reports(job_id, recs)
        except DuplicateReportError:
            # Some were stored before (a replay, or a write cut off by an outage that had
            # committed): store the rest, each seq once.
            lo = min(r.seq for r in recs)
            have = {r.seq for r in self.store.get_reports(job_id, after_seq=lo - 1,
                                                           limit=len(recs) + 1_000_000)}
            rest = [r for r in recs if r.seq not in have]
            if rest:
                self.store.append_reports(job_id, rest)

    @staticmethod
    def _guard(fn: Callable[..., object], *args: object, **kwargs: object) -> None:
        """Runs one store write; an unreachable store raises, anything else is logged."""
        try:
            fn(*args, **kwargs)
        except (JobStoreUnavailableError, StoreFencedError):
            raise
        except JobNotFoundError as e:
            logger.error("job store write dropped (%s): %s", getattr(fn, "__name__", fn), e)
        except Exception:
            logger.exception("job store write failed (%s)", getattr(fn, "__name__", fn))


# --------------------------------------------------------------------------- the writer


def _count(ops: list[Op]) -> int:
    return sum(len(op[2]) if op[0] == "reports" else 1 for op in ops if op[0] != "call")


class StoreWriter:
    """Applies job events to the store on one thread, surviving store outages.

    Args:
        store: the job store.
        journal_path: where to journal ops during an outage (None: memory only).
        max_batch: most ops applied in one pass.
        retry_interval_s: how often to try the store again during an outage.
        on_reconnect: called before writing again after an outage (the server takes its
            store lock again there); if it raises, the outage goes on — for good if it
            raises ``StoreDeposedError`` (see ``deposed_error``).
        check_owner: called before each batch and every ``check_interval_s`` when idle;
            if it raises, that is an outage (nothing is written until ``on_reconnect``
            passes).
        on_down: called with the reason when an outage starts, and with None when it
            ends (the server holds job starts meanwhile).
        on_deposed: called once, with the reason, when the writer is deposed.
        epoch: the owner epoch journaled ops are marked with.
        deposed_error: the exception type ``on_reconnect`` raises when another server
            owns the store now.
        check_interval_s: how often ownership is checked when no event comes.
    """

    def __init__(self, store: JobStore, journal_path: str | None = None,
                 max_batch: int = 50_000, retry_interval_s: float = 0.5,
                 on_reconnect: Callable[[], None] | None = None,
                 check_owner: Callable[[], None] | None = None,
                 on_down: Callable[[str | None], None] | None = None,
                 on_deposed: Callable[[str], None] | None = None,
                 epoch: int | None = None,
                 deposed_error: type[BaseException] | None = None,
                 check_interval_s: float = 1.0) -> None:
        self.store = store
        self._on_reconnect = on_reconnect
        self._check_owner = check_owner
        self._on_down = on_down
        self._on_deposed = on_deposed
        self._deposed_error = deposed_error
        self._check_interval_s = check_interval_s
        self.deposed: str | None = None
        """Why this writer writes nothing any more (another server owns the store)."""
        self._q: queue.SimpleQueue[Op | None] = queue.SimpleQueue()
        self._max_batch = max_batch
        self._retry_s = retry_interval_s
        self._applier = _Applier(store)
        self._journal = _Journal(journal_path, epoch) if journal_path else None
        self._pending: list[Op] = []  # during an outage: not yet stored, in order
        self._pending_events = 0  # reports count one each
        self._draining = False  # the store answers again; the backlog is being written
        self._down: str | None = None
        self._down_since: float | None = None
        self._closed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tandem-store-writer", daemon=True)
        self._thread.start()

    # ----------------------------------------------------------------- state

    @property
    def down_reason(self) -> str | None:
        """Why the store cannot be written now (None when it can)."""
        if self.deposed is not None:
            return self.deposed
        reason = self._down
        if reason is None or self._draining:
            return None
        where = (f"; they are journaled in {self._journal.path}" if self._journal else "")
        return (f"{reason} (since {time.strftime('%H:%M:%S', time.localtime(self._down_since))};"
                f" {self._pending_events} job event(s) wait to be written{where} and are written "
                f"in order once it answers)")

    @property
    def backlog(self) -> int:
        """Job events (each report counts one) kept during an outage, not yet stored."""
        return self._pending_events

    # ----------------------------------------------------------------- API

    def put(self, op: Op) -> None:
        if not self._closed and self.deposed is None:
            self._q.put(op)

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Waits until everything put so far is stored; False on timeout, or at once when
        the store is down (what was put stays queued and is written later)."""
        done = threading.Event()
        self.put(("call", done.set))
        deadline = time.monotonic() + timeout_s
        while not done.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
            if (self._down is not None or time.monotonic() >= deadline or self._closed
                    or self.deposed is not None):
                return done.is_set()
        return True

    def close(self, timeout_s: float = 30.0) -> None:
        """Stores what is queued, then stops; later ops are dropped. During an outage it
        does not wait: what is not stored stays in the journal for the next server."""
        if self._closed:
            return
        if self._down is None and self.deposed is None:
            self.flush(timeout_s)
        self._closed = True
        self._stop.set()
        self._q.put(None)
        self._thread.join(timeout_s)
        if self._down is not None and self._journal is not None and self.deposed is None:
            self._journal_append(self._drain())
            logger.warning("the job store is still down: %d job event(s) stay in %s for the "
                           "next server", self._journal.count, self._journal.path)
        if self._journal is not None:
            self._journal.close()

    # ----------------------------------------------------------------- thread

    def _drain(self) -> list[Op]:
        out: list[Op] = []
        while True:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                return out
            if item is not None:
                out.append(item)

    def _run(self) -> None:
        while True:
            if self.deposed is not None:
                return
            if self._down is not None:
                if not self._retry():
                    return
                continue
            try:
                first = self._q.get(timeout=self._check_interval_s)
            except queue.Empty:
                self._owner_ok([])  # idle: notice a lost lock before the next event
                continue
            if first is None:
                return
            items = [first]
            stop = False
            while len(items) < self._max_batch:
                try:
                    item = self._q.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stop = True
                    break
                items.append(item)
            if self._owner_ok(items):
                try:
                    self._applier.apply(items)
                except _Outage as o:
                    self._enter_outage(items[o.index:], o.error)
                except _Deposed as d:
                    self._depose(str(d))
            if stop:
                return

    def _owner_ok(self, items: list[Op]) -> bool:
        """Asks ``check_owner``; when it fails, ``items`` wait in an outage."""
        if self._check_owner is None:
            return True
        try:
            self._check_owner()
        except Exception as e:  # noqa: BLE001
            self._enter_outage(items, e, what="this server cannot prove it still owns the "
                                              "job store")
            return False
        return True

    def _enter_outage(self, rest: list[Op], error: BaseException,
                      what: str = "the job store is unreachable") -> None:
        self._pending = list(rest)
        self._pending_events = _count(self._pending)
        self._down_since = time.time()
        self._down = f"{what}: {error}"
        logger.error("%s; job events are kept and written once it answers", self._down)
        self._journal_append(self._pending)
        self._tell_down(self._down)

    def _tell_down(self, reason: str | None) -> None:
        if self._on_down is not None:
            try:
                self._on_down(reason)
            except Exception:
                logger.exception("store writer: the outage callback failed")

    def _depose(self, reason: str) -> None:
        """Another server owns the store now: drop what waits, write nothing again."""
        self.deposed = reason
        dropped = self._pending_events + _count([i for i in self._drain()])
        self._pending = []
        self._pending_events = 0
        aside = self._journal.set_aside() if self._journal is not None else None
        logger.error("%s (%d job event(s) not written%s)", reason, dropped,
                     f"; the journal is kept aside in {aside}" if aside else "")
        self._tell_down(reason)
        if self._on_deposed is not None:
            try:
                self._on_deposed(reason)
            except Exception:
                logger.exception("store writer: the deposed callback failed")

    def _journal_append(self, ops: list[Op]) -> None:
        if self._journal is None:
            return
        try:
            self._journal.append(ops)
        except OSError:
            logger.exception("cannot write the journal %s; job events are kept in memory only",
                             self._journal.path)

    def _retry(self) -> bool:
        """One outage round: journal what arrived, try the store. False: stop the thread."""
        deadline = time.monotonic() + self._retry_s
        while time.monotonic() < deadline:
            try:
                item = self._q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if item is None:
                return False
            drained = [item, *self._drain_until_stop()]
            stopping = drained[-1] is None
            batch: list[Op] = [b for b in drained if b is not None]
            self._pending.extend(batch)
            self._pending_events += _count(batch)
            self._journal_append(batch)
            if stopping:
                return False
        if self._on_reconnect is not None:
            try:
                self._on_reconnect()
            except Exception as e:  # noqa: BLE001
                if self._deposed_error is not None and isinstance(e, self._deposed_error):
                    self._depose(str(e))
                    return False
                self._down = (f"{e}" if isinstance(e, JobStoreUnavailableError)
                              else f"the job store cannot be written: {e}")
                return True
        self._draining = True
        try:
            self._applier.apply(self._pending, replaying=True)
        except _Outage as o:
            self._pending = self._pending[o.index:]
            self._pending_events = _count(self._pending)
            self._down = f"the job store is unreachable: {o.error}"
            self._draining = False
            return True
        except _Deposed as d:
            self._draining = False
            self._depose(str(d))
            return False
        n = self._pending_events
        since = self._down_since or time.time()
        if self._journal is not None:  # before the backlog reads 0: no journal once it does
            self._journal.clear()
        self._pending = []
        self._pending_events = 0
        self._down = None
        self._down_since = None
        self._draining = False
        logger.warning("the job store answers again: wrote %d job event(s) kept during the "
                       "outage of %.1f s", n, time.time() - since)
        self._tell_down(None)
        return True

    def _drain_until_stop(self) -> list[Op | None]:
        out: list[Op | None] = []
        while len(out) < self._max_batch:
            try:
                item = self._q.get_nowait()
            except queue.Empty:
                break
            out.append(item)
            if item is None:
                break
        return out
