"""The store writer through an outage (a store that refuses writes for a while): nothing is
lost, order is kept, a replay stores each report and each state change once, and a journal
left behind by a dead writer is replayed by the next."""

from __future__ import annotations

import os
import time

import pytest

from tandem.jobs.store import InMemoryJobStore, JobRecord, JobStoreUnavailableError, ReportRecord
from tandem.server.writer import StoreWriter, read_journal, replay_journal


class FlakyStore(InMemoryJobStore):
    """Refuses every call while ``down``; ``commit_then_fail`` stores a write, then raises
    as a connection lost before the commit was acknowledged would."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False
        self.commit_then_fail = False

    def _gate(self) -> None:
        if self.down:
            raise JobStoreUnavailableError("the store is down (test)")

    def append_reports(self, job_id, reports):  # type: ignore[no-untyped-def]
        self._gate()
        super().append_reports(job_id, reports)
        if self.commit_then_fail:
            self.commit_then_fail = False
            self.down = True
            raise JobStoreUnavailableError("lost after commit (test)")

    def set_state(self, *a, **k):  # type: ignore[no-untyped-def]
        self._gate()
        return super().set_state(*a, **k)

    def update_job(self, *a, **k):  # type: ignore[no-untyped-def]
        self._gate()
        return super().update_job(*a, **k)

    def get_job(self, job_id):  # type: ignore[no-untyped-def]
        self._gate()
        return super().get_job(job_id)


def _until(cond, timeout_s: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _report(i: int) -> tuple:
    return ("reports", "j", [ReportRecord("j", i, {"i": i}, float(i))])


def test_an_outage_keeps_everything_in_order_and_writes_it_once(tmp_path):
    store = FlakyStore()
    store.create_job(JobRecord("j", "n", "PENDING", 0.0))
    journal = str(tmp_path / "journal.jsonl")
    w = StoreWriter(store, journal_path=journal, retry_interval_s=0.05)
    w.put(("state", "j", "RUNNING", 1.0, None, None, None))
    w.put(_report(0))
    assert w.flush(5)
    store.commit_then_fail = True  # report 1 is stored, but the writer hears "unreachable"
    ended = []
    for i in range(1, 50):
        w.put(_report(i))
    w.put(("update", "j", {"result": {"done": True}}))
    w.put(("state", "j", "FINISHED", 2.0, None, None, None))
    w.put(("call", lambda: ended.append(True)))
    _until(lambda: w.down_reason is not None)
    assert "unreachable" in w.down_reason and journal in w.down_reason
    assert not w.flush(0.2)  # answers at once while down
    assert os.path.getsize(journal) > 0 and not ended
    store.down = False
    _until(lambda: ended == [True] and w.down_reason is None and w.backlog == 0)
    assert not os.path.exists(journal)
    assert [r.seq for r in store.get_reports("j", limit=100)] == list(range(50))
    assert [t.to_state for t in store.transitions("j")] == ["PENDING", "RUNNING", "FINISHED"]
    assert store.get_job("j").result == {"done": True}
    w.close()


def test_a_journal_left_by_a_dead_writer_is_replayed_once(tmp_path):
    store = FlakyStore()
    store.create_job(JobRecord("j", "n", "PENDING", 0.0))
    journal = str(tmp_path / "journal.jsonl")
    w = StoreWriter(store, journal_path=journal, retry_interval_s=60)
    w.put(_report(0))
    assert w.flush(5)
    store.down = True
    for i in range(1, 5):
        w.put(_report(i))
    w.put(("state", "j", "FINISHED", 3.0, "boom", "tb", None))
    _until(lambda: w.down_reason is not None)
    w.close()  # the store is still down: what is left stays in the journal
    assert len(read_journal(journal)) == 5
    with open(journal, "a") as f:
        f.write('{"op": "reports", "job_id"')  # a torn last line (a crash mid-write)
    with pytest.raises(JobStoreUnavailableError):
        replay_journal(store, journal)  # still down: kept
    assert os.path.exists(journal)
    store.down = False
    assert replay_journal(store, journal) == 5
    assert not os.path.exists(journal)
    rec = store.get_job("j")
    assert rec.state == "FINISHED" and rec.error == "boom"
    assert [r.seq for r in store.get_reports("j")] == [0, 1, 2, 3, 4]
    assert replay_journal(store, journal) == 0
