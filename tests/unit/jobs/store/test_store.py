"""Job store: the conformance suite over every implementation, plus ``open_store``."""

from __future__ import annotations

import os
import time

import pytest

from tandem._core.errors import ConfigError
from tandem.jobs.store import (
    InMemoryJobStore,
    JobRecord,
    JobStore,
    JobStoreUnavailableError,
    open_store,
)
from tandem.jobs.store.sql import SQLJobStore, normalize_url
from tandem.jobs.testing.store_conformance import JobStoreTestCase, make_job


class TestJobStore(JobStoreTestCase):
    """Runs the whole suite on memory, SQLite (file and :memory:) and PostgreSQL."""


@pytest.mark.timeout(30)
class TestOpenStore:
    def test_memory(self) -> None:
        assert isinstance(open_store(), InMemoryJobStore)
        assert isinstance(open_store("memory"), InMemoryJobStore)
        with pytest.raises(ConfigError, match="retry_timeout_s"):
            open_store("memory", retry_timeout_s=1)

    def test_path_opens_sqlite_file(self, tmp_path: os.PathLike[str]) -> None:
        path = os.path.join(os.fspath(tmp_path), "sub", "dir", "jobs.db")
        with open_store(path) as store:
            assert isinstance(store, SQLJobStore)
            store.create_job(make_job("j"))
        assert os.path.exists(path)
        with open_store(f"sqlite:///{path}") as store:
            assert store.get_job("j") == make_job("j")

    def test_pathlike_and_home(
        self, tmp_path: os.PathLike[str], monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("HOME", os.fspath(tmp_path))
        with open_store("~/jobs.db") as store:
            assert os.fspath(tmp_path) in store.url
        with open_store(os.path.join(os.fspath(tmp_path), "b.db")) as store:
            assert store.list_jobs() == []

    def test_store_passes_through(self) -> None:
        s = InMemoryJobStore()
        assert open_store(s) is s

    def test_bad_inputs(self) -> None:
        with pytest.raises(ConfigError, match="'mysql'.*allowed schemes"):
            open_store("mysql://u@h/db")
        with pytest.raises(ConfigError, match="empty path"):
            open_store("")
        with pytest.raises(ConfigError, match="int"):
            open_store(3)  # type: ignore[arg-type]

    def test_normalize_url(self) -> None:
        assert normalize_url("postgresql://u@h:5/db") == "postgresql+psycopg://u@h:5/db"
        assert normalize_url("postgres://u@h/db") == "postgresql+psycopg://u@h/db"
        assert normalize_url("postgresql+psycopg://u@h/db") == "postgresql+psycopg://u@h/db"
        assert normalize_url("sqlite:////a/b.db") == "sqlite:////a/b.db"
        with pytest.raises(ConfigError, match="psycopg"):
            normalize_url("postgresql+psycopg2://u@h/db")
        with pytest.raises(ConfigError, match="not a database URL"):
            normalize_url("jobs.db")

    def test_closed_store_refuses_calls(self, tmp_path: os.PathLike[str]) -> None:
        store = open_store(os.path.join(os.fspath(tmp_path), "j.db"))
        store.close()
        store.close()  # idempotent
        with pytest.raises(Exception, match="closed"):
            store.list_jobs()


class TestRecords:
    def test_job_record_validates(self) -> None:
        with pytest.raises(ValueError, match="job_id"):
            JobRecord("", "n", "PENDING", 0.0)
        with pytest.raises(TypeError, match="wrap it in a list"):
            JobRecord("j", "n", "PENDING", 0.0, tags="abc")  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="bytes"):
            JobRecord("j", "n", "PENDING", 0.0, spec="text")  # type: ignore[arg-type]
        r = JobRecord("j", "n", "PENDING", 0.0, tags=["a"], spec=bytearray(b"x"))
        assert r.tags == ("a",) and r.spec == b"x"
        assert hash(r) == hash(JobRecord("j", "n", "PENDING", 0.0, tags=("a",), spec=b"x"))

    def test_abc_has_at_most_ten_abstract_methods(self) -> None:
        assert len(JobStore.__abstractmethods__) <= 10


@pytest.mark.timeout(30)
class TestSQLiteLocking:
    """A write lock held elsewhere makes the store wait and retry, not fail."""

    @staticmethod
    def _hold_write_lock(path: str, seconds: float) -> tuple[object, object]:
        import sqlite3
        import threading

        locked = threading.Event()

        def hold() -> None:
            conn = sqlite3.connect(path, isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO tandem_meta(key, value) VALUES ('lock-test', 'x')")
            locked.set()
            time.sleep(seconds)
            conn.execute("ROLLBACK")
            conn.close()

        t = threading.Thread(target=hold)
        t.start()
        assert locked.wait(10)
        return t, locked

    def test_waits_for_a_held_lock(self, tmp_path: os.PathLike[str]) -> None:
        path = os.path.join(os.fspath(tmp_path), "jobs.db")
        # SQLite's own busy_timeout is tiny here, so the store's retry loop does the waiting.
        with SQLJobStore(f"sqlite:///{path}", busy_timeout_s=0.01) as store:
            t, _ = self._hold_write_lock(path, 0.5)
            store.create_job(make_job("j"))
            assert store.list_jobs()[0].job_id == "j"  # WAL: reads never waited
            t.join()  # type: ignore[attr-defined]

    def test_gives_up_after_retry_budget(self, tmp_path: os.PathLike[str]) -> None:
        path = os.path.join(os.fspath(tmp_path), "jobs.db")
        with SQLJobStore(f"sqlite:///{path}", busy_timeout_s=0.01, retry_timeout_s=0.2) as store:
            t, _ = self._hold_write_lock(path, 1.5)
            with pytest.raises(JobStoreUnavailableError, match="retry_timeout_s"):
                store.create_job(make_job("j"))
            assert store.list_jobs() == []  # reads still work while the lock is held
            t.join()  # type: ignore[attr-defined]
            store.create_job(make_job("j"))
            assert store.get_job("j") is not None
