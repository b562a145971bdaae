"""One owner per store, and a store checked before it is trusted.

``StoreLock.acquire`` makes a server the only one on its job store: on SQLite an exclusive
``flock`` on ``<jobs.db>.lock`` (beside the file), on PostgreSQL a session advisory lock on
a connection held for the server's life. The lock records who holds it (pid, address,
host), so a second server refuses naming the first — before it re-queues anything.

``check_sqlite_file`` and ``HistoryMarker`` catch damage at start: a SQLite file that
fails ``PRAGMA quick_check``, or a store that is missing or empty although this server
folder recorded jobs in it before. The server refuses to start, naming the file and what
to do, instead of silently starting with an empty history.

Fencing: holding the lock is not enough (a PostgreSQL session, and its advisory lock, can
be lost in an outage while this server still runs jobs). Once the lock is held the server
takes the store's next *owner epoch* (``JobStore.take_ownership``), and every write of
its store checks that epoch in the same transaction, so a server whose lock another one
took can never write again (``StoreFencedError``). ``StoreLock.verify`` proves the lock is
still held (the server starts and finishes no job while it cannot); ``StoreLock.ensure``
takes a lost lock again, but only if nobody owned the store meanwhile (the epoch is still
this server's); otherwise the server is *deposed* (``StoreDeposedError``) for good.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import sqlite3
import time
from typing import Any

from tandem._core.errors import ConfigError, TandemError
from tandem.jobs.store import JobStore, JobStoreError, JobStoreUnavailableError

__all__ = ["HistoryMarker", "StoreDeposedError", "StoreLock", "StoreLockLostError",
           "StoreOwnedError", "check_sqlite_file", "sqlite_path"]

logger = logging.getLogger(__name__)

_PG_LOCK_KEY = 7460110502  # the schema lock is ...501


class StoreOwnedError(TandemError):
    """Another server holds the store."""


class StoreLockLostError(TandemError):
    """This server cannot prove it still holds its store's lock (it may take it again)."""


class StoreDeposedError(StoreOwnedError):
    """Another server owned the store since this one lost its lock: this one must never
    write to it again."""


def sqlite_path(url: str) -> str | None:
    """The file of a ``sqlite:///`` URL (None for other stores or in-memory SQLite)."""
    if not url.startswith("sqlite:///"):
        return None
    path = url[len("sqlite:///"):]
    if path in ("", ":memory:") or path.startswith("file::memory:"):
        return None
    return os.path.abspath(path)


def _describe(owner: dict[str, object]) -> str:
    since = owner.get("started_at")
    when = (f", since {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(since))}"
            if isinstance(since, (int, float)) else "")
    return (f"the tandem server pid {owner.get('pid', '?')} at {owner.get('address', '?')} "
            f"(host {owner.get('host', '?')}{when})")


class StoreLock:
    """The exclusive hold of one server on its job store.

    Args:
        store: the opened store.
        url: its URL (``config.db_url``).
        owner: what to record about this server (pid, address, ...).
    """

    def __init__(self, store: JobStore, url: str, owner: dict[str, Any]) -> None:
        self.store = store
        self.url = url
        self.owner = {"pid": os.getpid(), "host": socket.gethostname(),
                      "started_at": time.time(), **owner}
        self._fd: int | None = None
        self._lock_path: str | None = None
        self._conn: Any = None
        self.epoch: int | None = None
        """The owner epoch this server took (None before ``acquire``)."""
        self.previous_epoch: int | None = None
        """The epoch of the owner before this one (whose journal may be replayed)."""
        self.deposed: str | None = None
        """Why this server may never write again (another one owned the store since)."""

    @property
    def kind(self) -> str:
        engine = getattr(self.store, "engine", None)
        if engine is None:
            return "memory"
        return "sqlite" if engine.dialect.name == "sqlite" else engine.dialect.name

    def acquire(self) -> None:
        """Takes the store.

        Raises:
            StoreOwnedError: another server holds it (named in the message).
        """
        kind = self.kind
        if kind == "sqlite":
            path = sqlite_path(self.url)
            if path is not None:
                self._acquire_file(path + ".lock")
        elif kind == "postgresql":
            self._acquire_pg()
        try:
            self.previous_epoch, self.epoch = self.store.take_ownership()
        except BaseException:
            self.release()
            raise

    def _acquire_file(self, lock_path: str) -> None:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                raw = os.pread(fd, 65536, 0)
                owner = json.loads(raw.decode("utf-8") or "{}")
            except (OSError, ValueError):
                owner = {}
            os.close(fd)
            raise StoreOwnedError(self._owned_message(owner, f"the lock {lock_path}")) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(self.owner).encode(), 0)
        self._fd = fd
        self._lock_path = lock_path

    def _acquire_pg(self) -> None:
        import sqlalchemy as sa

        engine = self.store.engine  # type: ignore[attr-defined]
        conn = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        got = conn.execute(sa.text("SELECT pg_try_advisory_lock(:k)"), {"k": _PG_LOCK_KEY}).scalar()
        if not got:
            row = conn.execute(sa.text("SELECT value FROM tandem_meta WHERE key = 'owner'")).first()
            conn.close()
            try:
                owner = json.loads(row[0]) if row else {}
            except ValueError:
                owner = {}
            raise StoreOwnedError(self._owned_message(owner, "a PostgreSQL advisory lock"))
        conn.execute(sa.text(
            "INSERT INTO tandem_meta (key, value) VALUES ('owner', :v) "
            "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"), {"v": json.dumps(self.owner)})
        self._conn = conn

    def verify(self) -> None:
        """Proves the lock is still held: the PostgreSQL session holding it answers, or
        the lock file held is still the one at its path (a file deleted or replaced would
        let a second server lock a new one).

        Raises:
            StoreLockLostError: it cannot be proven (take it again with ``ensure``).
        """
        if self.deposed is not None:
            raise StoreLockLostError(self.deposed)
        if self._lock_path is not None:
            try:
                same = (self._fd is not None and
                        os.stat(self._lock_path).st_ino == os.fstat(self._fd).st_ino)
            except OSError:
                same = False
            if not same:
                raise StoreLockLostError(
                    f"the store lock file {self._lock_path} was deleted or replaced while "
                    f"this server held it")
        if self.kind != "postgresql" or self.epoch is None:
            return
        if self._conn is None:
            raise StoreLockLostError("the session holding the store's advisory lock is gone")
        import sqlalchemy as sa

        try:
            self._conn.execute(sa.text("SELECT 1"))
        except Exception as e:  # noqa: BLE001
            try:
                self._conn.invalidate()
            except Exception:
                logger.debug("closing a dead lock session failed", exc_info=True)
            self._conn = None
            raise StoreLockLostError(
                f"the session holding the store's advisory lock was lost (the store may be "
                f"unreachable) "
                f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else e})"
            ) from None

    def ensure(self) -> None:
        """Makes sure the lock is held, taking a lost one again — only if no other server
        owned the store meanwhile (the owner epoch is still this server's).

        Raises:
            StoreDeposedError: another server owned the store since (this one must stop
                writing for good).
            StoreOwnedError: another server holds the lock now.
            Exception: the store is still unreachable.
        """
        if self.deposed is not None:
            raise StoreDeposedError(self.deposed)
        try:
            self.verify()
            return
        except StoreLockLostError:
            pass
        try:
            if self._lock_path is not None:
                if self._fd is not None:
                    os.close(self._fd)  # the lock on a deleted file proves nothing
                    self._fd = None
                self._acquire_file(self._lock_path)
            else:
                self._acquire_pg()
        except StoreOwnedError as e:
            if self.store.owner_epoch() != self.epoch:
                self.deposed = self._deposed_message()
                raise StoreDeposedError(self.deposed) from None
            raise e from None
        except (OSError, JobStoreError):
            raise
        except Exception as e:  # noqa: BLE001 - a driver error: the store is unreachable
            text = str(getattr(e, "orig", None) or e).strip().splitlines()
            raise JobStoreUnavailableError(
                f"the job store {self.url} is unreachable: {text[0] if text else e}") from None
        current = self.store.owner_epoch()
        if current != self.epoch:
            self.release()
            self.deposed = self._deposed_message(current)
            raise StoreDeposedError(self.deposed)
        logger.warning("took the store lock again after losing it (owner epoch %s)", self.epoch)

    def _deposed_message(self, current: int | None = None) -> str:
        now = current if current is not None else self.store.owner_epoch()
        return (f"another server took the job store {self.url} while this one had lost its "
                f"lock (owner epoch {self.epoch} -> {now}); that server runs the jobs now. "
                f"This one writes nothing more to the store and starts no job: stop it "
                f"(`tandem server stop`).")

    def _owned_message(self, owner: dict[str, object], how: str) -> str:
        return (
            f"the job store {self.url} is in use by {_describe(owner)} (held through {how}). "
            f"Two servers on one store would run the same jobs twice. Stop that server with "
            f"`tandem server stop` (or `kill {owner.get('pid', '<pid>')}`), or start this one "
            f"with another --storage or --db."
        )

    def release(self) -> None:
        if self._fd is not None:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            finally:
                os.close(self._fd)
                self._fd = None
        if self._conn is not None:
            try:
                # The session (and its lock) must end: a pooled connection returned to the
                # pool would keep holding the advisory lock.
                import sqlalchemy as sa

                self._conn.execute(sa.text("SELECT pg_advisory_unlock_all()"))
            except Exception:
                logger.debug("unlocking the store lock failed", exc_info=True)
            try:
                self._conn.invalidate()
            except Exception:
                logger.debug("closing the store lock session failed", exc_info=True)
            self._conn = None


def read_lock_owner(lock_path: str) -> dict[str, object] | None:
    """Who holds a SQLite store's lock file (None when nobody does)."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return None  # nobody holds it
        except OSError:
            pass
        try:
            owner = json.loads(os.pread(fd, 65536, 0).decode("utf-8") or "{}")
        except ValueError:
            return {}
        return owner if isinstance(owner, dict) else {}
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- damage


def check_sqlite_file(path: str) -> None:
    """Refuses a SQLite job store that fails ``PRAGMA quick_check``, or that is a SQLite
    database of something else (tables, but none of tandem's). The file is opened
    read-only and immutable: nothing is changed, not even a lock or journal beside it.

    Raises:
        ConfigError: naming the file, what is wrong and what to do.
    """
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return
    from urllib.parse import quote

    tables: list[str] = []
    try:
        conn = sqlite3.connect(f"file:{quote(os.path.abspath(path))}?mode=ro&immutable=1",
                               uri=True, timeout=10)
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
            tables = [r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()]
        finally:
            conn.close()
        problems = [r[0] for r in rows if r and r[0] != "ok"]
    except sqlite3.DatabaseError as e:
        problems = [str(e)]
    if problems:
        raise ConfigError(
            f"the job store {path} is damaged ({'; '.join(problems[:3])}). Nothing was changed. "
            f"Restore it from a backup, or salvage what is readable with "
            f"`sqlite3 {path} .recover | sqlite3 {path}.recovered` and move that into place; "
            f"to start with an empty history instead, move the file aside "
            f"(`mv {path} {path}.damaged`) and start the server again."
        )
    theirs = [t for t in tables if not t.startswith(("tandem_", "sqlite_"))]
    if theirs and "tandem_meta" not in tables:
        shown = ", ".join(sorted(theirs)[:5]) + (", ..." if len(theirs) > 5 else "")
        raise ConfigError(
            f"{path} is a SQLite database of something else (its tables: {shown}), not a "
            f"tandem job store. Nothing was changed. Give --db a new file (or leave it "
            f"unset: <storage>/jobs.db), or the jobs.db of a tandem server."
        )


class HistoryMarker:
    """``<storage>/history.json``: the stores this server folder has recorded jobs in, so
    that a store found missing or empty later is noticed instead of silently replaced."""

    def __init__(self, storage_path: str) -> None:
        self.path = os.path.join(storage_path, "history.json")

    def _read(self) -> dict[str, object]:
        try:
            with open(self.path) as f:
                data = json.load(f)
            return data if isinstance(data, dict) else {}
        except (OSError, ValueError):
            return {}

    def recorded(self, url: str) -> bool:
        return bool(self._read().get(url))

    def mark(self, url: str) -> None:
        data = self._read()
        if data.get(url):
            return
        data[url] = {"first_job_recorded_at": time.time()}
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=2)
        os.replace(tmp, self.path)

    def check_before_open(self, url: str) -> None:
        """Refuses a SQLite store file that is missing or empty but held jobs before."""
        path = sqlite_path(url)
        if path is None:
            return
        if os.path.exists(path) and os.path.getsize(path) == 0 and not self.recorded(url):
            # A store is never 0 bytes once opened (its tables are made at once): truncated.
            raise ConfigError(
                f"the job store {path} is empty (0 bytes): it was truncated, or is not a job "
                f"store. Restore it from a backup; to start with an empty history on purpose, "
                f"delete it and start the server again.")
        if not self.recorded(url):
            return
        if not os.path.exists(path) or os.path.getsize(path) == 0:
            state = "missing" if not os.path.exists(path) else "empty (0 bytes)"
            raise ConfigError(self._lost_message(url, f"the file {path} is {state}"))

    def check_after_open(self, url: str, store: JobStore) -> bool:
        """Refuses a store that holds no job although jobs were recorded in it before;
        returns whether it holds jobs (a store that does is marked, if it was not yet)."""
        has_jobs = bool(store.list_jobs(limit=1))
        if self.recorded(url) and not has_jobs:
            raise ConfigError(self._lost_message(url, "it holds no jobs"))
        if has_jobs:
            self.mark(url)
        return has_jobs

    def _lost_message(self, url: str, what: str) -> str:
        return (
            f"the job store {url} has lost its history: {what}, but this server recorded jobs "
            f"in it before (see {self.path}). Restore the store from a backup; to start with "
            f"an empty history on purpose, delete {self.path} and start the server again."
        )
