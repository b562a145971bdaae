"""The store lock, the damage checks and the spec checks, without a server process."""

from __future__ import annotations

import os

import pytest

from tandem._core.errors import ConfigError
from tandem.jobs.spec import JobSpec
from tandem.jobs.store import JobRecord, open_store
from tandem.server.loader import SpecError, check_env_vars, validate_spec
from tandem.server.ownership import (
    HistoryMarker,
    StoreLock,
    StoreOwnedError,
    check_sqlite_file,
    read_lock_owner,
)


def test_one_lock_per_sqlite_store_naming_its_owner(tmp_path):
    url = f"sqlite:///{tmp_path}/jobs.db"
    with open_store(url) as a, open_store(url) as b:
        first = StoreLock(a, url, {"address": "http://127.0.0.1:1"})
        first.acquire()
        assert read_lock_owner(f"{tmp_path}/jobs.db.lock")["address"] == "http://127.0.0.1:1"
        with pytest.raises(StoreOwnedError) as e:
            StoreLock(b, url, {"address": "http://127.0.0.1:2"}).acquire()
        assert "http://127.0.0.1:1" in str(e.value) and f"pid {os.getpid()}" in str(e.value)
        first.release()
        assert read_lock_owner(f"{tmp_path}/jobs.db.lock") is None
        second = StoreLock(b, url, {"address": "http://127.0.0.1:2"})
        second.acquire()
        second.release()


def test_damaged_sqlite_file_and_lost_history_are_refused(tmp_path):
    db = tmp_path / "jobs.db"
    url = f"sqlite:///{db}"
    with open_store(url) as store:
        store.create_job(JobRecord("j", "n", "PENDING", 0.0))
        marker = HistoryMarker(str(tmp_path))
        assert marker.check_after_open(url, store) is True  # a store with jobs is marked
    check_sqlite_file(str(db))  # healthy
    data = db.read_bytes()
    db.write_bytes(b"garbage" * 100 + data[700:])
    with pytest.raises(ConfigError, match="is damaged") as e:
        check_sqlite_file(str(db))
    assert str(db) in str(e.value) and ".recover" in str(e.value)
    db.write_bytes(b"")
    with pytest.raises(ConfigError, match="empty"):
        marker.check_before_open(url)
    db.unlink()
    with pytest.raises(ConfigError, match="missing"):
        marker.check_before_open(url)
    with open_store(url) as fresh, pytest.raises(ConfigError, match="holds no jobs"):
        marker.check_after_open(url, fresh)


class _R:
    pass


@pytest.mark.parametrize(("kw", "field"), [
    ({"bundles": ({"CPU": -1},)}, ("payload", "bundles", 0, "CPU")),
    ({"bundles": ({"GPU": float("nan")},)}, ("payload", "bundles", 0, "GPU")),
    ({"bundles": ({"CPU": True},)}, ("payload", "bundles", 0, "CPU")),
    ({"bundles": ()}, ("payload", "bundles")),
    ({"bundles": ({"CPU": 1},) * 10_001}, ("payload", "bundles")),
    ({"strategy": "pack"}, ("payload", "strategy")),
    ({"priority": 2**40}, ("payload", "priority")),
    ({"tags": ("",)}, ("payload", "tags", 0)),
])
def test_spec_checks_name_the_field(kw, field):
    args = {"name": "n", "bundles": ({"CPU": 1},), "runner": _R()}
    args.update(kw)
    with pytest.raises(SpecError) as e:
        validate_spec(JobSpec(**args))
    assert e.value.loc == field


def test_env_var_checks():
    check_env_vars({"OK_1": "x", "_A": ""}, ("env_vars",))
    for bad in ({"1A": "x"}, {"A-B": "x"}, {"A": "x\x00"}, {"A": 1}):
        with pytest.raises(SpecError):
            check_env_vars(bad, ("env_vars",))


def test_a_foreign_sqlite_file_is_refused_untouched(tmp_path):
    import hashlib
    import sqlite3

    from tandem.server import ServerConfig, TrainServer

    db = tmp_path / "notes.db"
    c = sqlite3.connect(db)
    c.execute("CREATE TABLE notes (text TEXT)")
    c.execute("INSERT INTO notes VALUES ('keep me')")
    c.commit()
    c.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match=r"a SQLite database of something else \(its tables: "
                                          r"notes\).*Nothing was changed"):
        TrainServer(ServerConfig(storage=str(tmp_path / "srv"), db=f"sqlite:///{db}",
                                 num_cpus=1, usage_interval_s=0))
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db", "srv"]  # no lock, no WAL
