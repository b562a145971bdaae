"""One way to open and use a SQL database, for every store tandem keeps in one: the job
store (``tandem.jobs.store.sql``), the model registry (``tandem.model.registry``) and the
train server's users and audit log (``tandem.server.users``).

- URLs: ``sqlite:///path`` or ``postgresql://...`` (psycopg 3), checked by
  :func:`normalize_url`.
- SQLite runs in WAL mode with a busy timeout, and a writing transaction starts with
  ``BEGIN IMMEDIATE``: pysqlite's implicit ``BEGIN`` is deferred, and a deferred
  transaction that later writes can fail with ``SQLITE_BUSY`` at once, without waiting.
- PostgreSQL connections are checked before use and an unreachable host fails in seconds.
- A forked child drops the connections it inherited (they belong to the parent).
- :func:`is_lock_error` says which errors mean "try the transaction again".
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from tandem._core.errors import ConfigError
from tandem._core.extras import import_optional

if TYPE_CHECKING:
    import sqlite3

__all__ = ["StoreEngine", "is_lock_error", "normalize_url", "open_engine", "transaction"]

_ALLOWED_SCHEMES = ("sqlite", "postgresql", "postgres")


def normalize_url(url: str) -> str:
    """The SQLAlchemy URL a store connects with.

    ``postgresql://`` and ``postgres://`` get the psycopg 3 driver
    (``postgresql+psycopg://``); ``sqlite:///path`` stays as it is.

    Raises:
        ConfigError: a scheme other than ``sqlite`` or ``postgresql``.
    """
    if not isinstance(url, str) or "://" not in url:
        raise ConfigError(
            f"job store URL {url!r} is not a database URL; use 'sqlite:///path/to/jobs.db' "
            f"or 'postgresql://user@host:port/db' (or pass a file path to open_store)"
        )
    scheme, rest = url.split("://", 1)
    base, _, driver = scheme.partition("+")
    if base not in _ALLOWED_SCHEMES:
        raise ConfigError(
            f"job store URL {url!r} has scheme {scheme!r}; allowed schemes are 'sqlite' and "
            f"'postgresql' (e.g. 'sqlite:////abs/path/jobs.db', 'postgresql://user@host/db')"
        )
    if base in ("postgresql", "postgres"):
        if driver and driver != "psycopg":
            raise ConfigError(
                f"job store URL {url!r} names the driver {driver!r}; tandem uses psycopg 3: "
                f"write 'postgresql://...' or 'postgresql+psycopg://...'"
            )
        return f"postgresql+psycopg://{rest}"
    return url


def is_lock_error(e: BaseException) -> bool:
    """True for errors that mean "try again": SQLite busy/locked, PostgreSQL deadlock or
    serialization failure. Such a transaction was rolled back, so retrying is safe."""
    msg = str(getattr(e, "orig", e)).lower()
    return (
        "database is locked" in msg
        or "database table is locked" in msg
        or "database schema is locked" in msg
        or "deadlock detected" in msg
        or "could not serialize access" in msg
    )


@dataclass(frozen=True)
class StoreEngine:
    """An engine opened by :func:`open_engine`, with what its user needs to know of it."""

    engine: Engine
    dialect: str
    """``"sqlite"`` or ``"postgresql"``."""
    in_memory: bool
    """An in-memory SQLite database: one connection, seen by this process only."""


# Engines whose pooled connections a forked child must not use (they are the parent's).
_ENGINES: weakref.WeakSet[Engine] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for engine in list(_ENGINES):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def open_engine(
    url: str,
    *,
    busy_timeout_s: float,
    what: str = "The job store URL",
    sqlite_pragmas: Sequence[str] = (),
    engine_kwargs: Mapping[str, object] | None = None,
) -> StoreEngine:
    """Creates the engine for ``url`` (already :func:`normalize_url`-ed).

    Args:
        busy_timeout_s: how long a SQLite statement waits for another writer's lock.
        what: how an error names the URL (e.g. "The job store URL 'postgresql://...'").
        sqlite_pragmas: more ``PRAGMA`` statements for each SQLite connection
            (e.g. ``"foreign_keys = ON"``).
        engine_kwargs: more keyword arguments for ``sqlalchemy.create_engine``.

    Raises:
        ImportError: PostgreSQL without psycopg installed (the message says what to install).
    """
    kwargs: dict[str, Any] = dict(engine_kwargs or {})
    parsed = sa.engine.make_url(url)
    dialect = parsed.get_backend_name()
    in_memory = False
    if dialect == "sqlite":
        database = parsed.database or ""
        in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args.setdefault("check_same_thread", False)
        connect_args.setdefault("timeout", busy_timeout_s)
        if in_memory:
            kwargs.setdefault("poolclass", sa.pool.StaticPool)
        else:
            os.makedirs(os.path.dirname(os.path.abspath(database)), exist_ok=True)
    else:
        import_optional(  # the PostgreSQL driver, psycopg 3
            "psycopg", "server", f"{what} {parsed.render_as_string(hide_password=True)!r}")
        kwargs.setdefault("pool_pre_ping", True)
        # An unreachable host fails in seconds instead of hanging the caller.
        kwargs.setdefault("connect_args", {}).setdefault("connect_timeout", 5)
    engine = sa.create_engine(url, **kwargs)
    if dialect == "sqlite":
        _install_sqlite_hooks(engine, int(busy_timeout_s * 1000), tuple(sqlite_pragmas))
    _ENGINES.add(engine)
    return StoreEngine(engine=engine, dialect=dialect, in_memory=in_memory)


def _install_sqlite_hooks(engine: Engine, busy_timeout_ms: int, pragmas: tuple[str, ...]) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: sqlite3.Connection, _record: object) -> None:
        # We issue BEGIN ourselves (below), so pysqlite must not.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        try:
            cur.execute(f"PRAGMA busy_timeout = {busy_timeout_ms}")
            cur.execute("PRAGMA journal_mode = WAL")
            for pragma in pragmas:
                cur.execute(f"PRAGMA {pragma}")
        finally:
            cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        write = conn.get_execution_options().get("tandem_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")


@contextmanager
def transaction(engine: Engine, write: bool) -> Iterator[Connection]:
    """One transaction on a connection of ``engine``; on SQLite a writing one takes the
    write lock at its start (``BEGIN IMMEDIATE``), so it waits there rather than failing
    half-way."""
    with engine.connect() as conn:
        if write:
            conn = conn.execution_options(tandem_write=True)
        with conn.begin():
            yield conn
