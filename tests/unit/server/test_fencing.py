"""Fenced ownership of a job store, on SQLite and a real PostgreSQL: a server that lost its
lock cannot prove it owns the store (nothing is written, no job starts) until it takes the
lock again; once another server took the store, the first one can never write again."""

from __future__ import annotations

import os
import threading
import time

import pytest

from tandem.jobs.store import JobRecord, StoreFencedError, open_store
from tandem.server.ownership import (
    StoreDeposedError,
    StoreLock,
    StoreLockLostError,
    StoreOwnedError,
)
from tandem.server.writer import StoreWriter, replay_journal


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/jobs.db"
    return request.getfixturevalue("postgres_database_url")


def _job(job_id: str) -> JobRecord:
    return JobRecord(job_id=job_id, name="j", state="PENDING", submitted_at=1.0,
                     spec_json={})


def _lose_lock(lock: StoreLock) -> None:
    """What an outage does to the lock: the PostgreSQL session dies (the advisory lock with
    it), or the SQLite lock file goes away."""
    if lock.kind == "postgresql":
        import sqlalchemy as sa

        pid = lock._conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
        with lock.store.engine.connect() as c:
            c.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    else:
        os.unlink(lock._lock_path)


def test_a_second_owner_fences_the_first_for_good(store_url, tmp_path):
    with open_store(store_url) as a_store, open_store(store_url) as b_store:
        a = StoreLock(a_store, store_url, {"address": "A"})
        a.acquire()
        first_epoch = a.epoch
        a_store.create_job(_job("job_1"))
        a_store.set_state("job_1", "RUNNING", 2.0)
        with pytest.raises(StoreOwnedError):  # one owner at a time
            StoreLock(b_store, store_url, {"address": "B"}).acquire()

        _lose_lock(a)
        with pytest.raises(StoreLockLostError):
            a.verify()
        b = StoreLock(b_store, store_url, {"address": "B"})
        b.acquire()  # the lock is free: B takes the store, as the next epoch
        assert (b.previous_epoch, b.epoch) == (first_epoch, first_epoch + 1)

        # A's writes are refused, in their own transaction: nothing changes
        with pytest.raises(StoreFencedError, match="another server took it"):
            a_store.set_state("job_1", "FINISHED", 3.0)
        with pytest.raises(StoreFencedError):
            a_store.create_job(_job("job_2"))
        assert b_store.get_job("job_1").state == "RUNNING"
        assert b_store.get_job("job_2") is None
        # and A may not take the lock back, even once B lets it go
        with pytest.raises(StoreDeposedError, match="another server took the job store"):
            a.ensure()
        b.release()
        with pytest.raises(StoreDeposedError):
            a.ensure()
        a.release()

        # B's writer goes on; a writer of A is deposed at its first write
        b2 = StoreLock(b_store, store_url, {"address": "B"})
        b2.acquire()
        deposed: list[str] = []
        down: list[str | None] = []
        journal = str(tmp_path / "journal.jsonl")
        writer = StoreWriter(a_store, journal_path=journal, check_owner=None,
                             on_deposed=deposed.append, on_down=down.append,
                             epoch=first_epoch)
        try:
            writer.put(("state", "job_1", "FINISHED", 4.0, None, None, None))
            deadline = time.monotonic() + 10
            while not deposed and time.monotonic() < deadline:
                time.sleep(0.01)
            assert deposed and "another server took it" in deposed[0]
            assert writer.down_reason == deposed[0] and down == [deposed[0]]
            writer.put(("state", "job_1", "FAILED", 5.0, None, None, None))  # dropped
        finally:
            writer.close()
        b_store.set_state("job_1", "FINISHED", 6.0)  # the owner's write passes
        to = [t.to_state for t in b_store.transitions("job_1")]
        assert to == ["PENDING", "RUNNING", "FINISHED"], to
        b2.release()


def test_a_lost_lock_holds_writes_until_it_is_taken_again(store_url, tmp_path):
    with open_store(store_url) as a_store, open_store(store_url) as b_store:
        a = StoreLock(a_store, store_url, {"address": "A"})
        a.acquire()
        a_store.create_job(_job("job_1"))
        down: list[str | None] = []
        retake = threading.Event()

        def ensure() -> None:
            if not retake.is_set():
                raise StoreLockLostError("not yet")
            a.ensure()

        writer = StoreWriter(a_store, journal_path=str(tmp_path / "journal.jsonl"),
                             retry_interval_s=0.05, check_owner=a.verify,
                             on_reconnect=ensure, on_down=down.append, epoch=a.epoch,
                             deposed_error=StoreDeposedError, check_interval_s=0.05)
        try:
            _lose_lock(a)
            writer.put(("state", "job_1", "RUNNING", 2.0, None, None, None))
            deadline = time.monotonic() + 10
            while not down and time.monotonic() < deadline:
                time.sleep(0.01)
            assert down and "cannot prove it still owns" in down[0], down
            assert "wait to be written" in writer.down_reason
            assert a_store.get_job("job_1").state == "PENDING"  # held, not written
            retake.set()  # nobody took the store meanwhile: A takes its lock again
            deadline = time.monotonic() + 10
            while down[-1] is not None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert down[-1] is None and writer.down_reason is None
            assert a_store.get_job("job_1").state == "RUNNING"
            with pytest.raises(StoreOwnedError):  # A holds it again
                StoreLock(b_store, store_url, {"address": "B"}).acquire()
        finally:
            writer.close()
            a.release()


def test_a_journal_of_an_older_owner_is_not_replayed(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    journal = str(tmp_path / "journal.jsonl")
    with open_store(url) as store:
        lock = StoreLock(store, url, {})
        lock.acquire()
        store.create_job(_job("job_1"))
        from tandem.server.writer import _Journal

        j = _Journal(journal, epoch=lock.epoch)
        j.append([("state", "job_1", "FINISHED", 3.0, None, None, None)])
        j.close()
        lock.release()
        # another owner came and went (epoch +1): the journal is stale
        other = StoreLock(store, url, {})
        other.acquire()
        other.release()
        third = StoreLock(store, url, {})
        third.acquire()
        assert replay_journal(store, journal, owner_epoch=third.previous_epoch) == 0
        assert store.get_job("job_1").state == "PENDING"
        assert os.path.exists(journal + ".stale") and not os.path.exists(journal)
        third.release()


def test_held_starts_start_no_job_until_released():
    """What the server does while it cannot prove it owns its store."""
    from tandem.cluster.local import LocalCluster
    from tandem.jobs.handle import JobHandle
    from tandem.jobs.service import LocalJobService
    from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec, JobStatus

    class Done(JobRunner):
        def run(self, ctx):
            return JobOutcome(JobStatus.FINISHED, value=1)

    svc = LocalJobService(LocalCluster(num_cpus=1))
    try:
        svc.hold_starts("the store lock was lost")
        job = svc.submit(JobSpec("held", ({"CPU": 1},), Done()))
        svc.poke()
        assert job.status is JobStatus.PENDING
        svc.hold_starts(None)
        assert JobHandle(job, svc).wait(timeout=10) == 1
    finally:
        svc.shutdown()
