"""``SQLJobStore``: the job store on SQLite (the default) or PostgreSQL, via SQLAlchemy Core."""

from __future__ import annotations

import dataclasses
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine, Row

from tandem.jobs.store.base import (
    RUNNING_STATE,
    TERMINAL_STATES,
    DuplicateJobError,
    DuplicateReportError,
    JobRecord,
    JobStore,
    JobStoreError,
    JobStoreUnavailableError,
    Order,
    ReportRecord,
    StoreFencedError,
    TransitionRecord,
    UsageSample,
    check_json_dict,
    check_list_args,
    check_state_args,
    check_update_fields,
    decode_json,
    encode_json,
    job_not_found,
    states_filter,
)
from tandem.jobs.store.engine import (  # noqa: F401 - normalize_url: its older path
    is_lock_error,
    normalize_url,
    open_engine,
    transaction,
)
from tandem.jobs.store.migrate import Lineage, folder_of, migrate

__all__ = ["LINEAGE", "SCHEMA_VERSION", "SQLJobStore", "normalize_url"]

T = TypeVar("T")

#: The oldest schema a tandem from before Alembic reads; stored in ``tandem_meta`` (a
#: revision an older tandem cannot read bumps it there, so that tandem refuses the store).
SCHEMA_VERSION = 1

# --------------------------------------------------------------------------- schema

metadata = sa.MetaData()

# Autoincrementing 64-bit ids: SQLite only autoincrements a column declared INTEGER.
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

meta_table = sa.Table(
    "tandem_meta",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)

jobs_table = sa.Table(
    "tandem_jobs",
    metadata,
    sa.Column("job_id", sa.String(128), primary_key=True),
    sa.Column("name", sa.String(512), nullable=False),
    sa.Column("state", sa.String(32), nullable=False),
    sa.Column("priority", sa.Integer, nullable=False, default=0),
    sa.Column("tags", sa.Text, nullable=False),  # JSON list, denormalised from tandem_job_tags
    sa.Column("submitted_at", sa.Float, nullable=False),
    sa.Column("started_at", sa.Float, nullable=True),
    sa.Column("ended_at", sa.Float, nullable=True),
    sa.Column("spec", sa.LargeBinary, nullable=True),
    sa.Column("spec_json", sa.Text, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Column("traceback", sa.Text, nullable=True),
    sa.Column("result", sa.Text, nullable=True),
    sa.Index("ix_tandem_jobs_submitted", "submitted_at", "job_id"),
    sa.Index("ix_tandem_jobs_state", "state", "submitted_at"),
    sa.Index("ix_tandem_jobs_name", "name", "submitted_at"),
)

tags_table = sa.Table(
    "tandem_job_tags",
    metadata,
    sa.Column(
        "job_id",
        sa.String(128),
        sa.ForeignKey("tandem_jobs.job_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("tag", sa.String(256), primary_key=True),
    sa.Index("ix_tandem_job_tags_tag", "tag", "job_id"),
)

transitions_table = sa.Table(
    "tandem_transitions",
    metadata,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column(
        "job_id",
        sa.String(128),
        sa.ForeignKey("tandem_jobs.job_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("from_state", sa.String(32), nullable=True),
    sa.Column("to_state", sa.String(32), nullable=False),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Index("ix_tandem_transitions_job", "job_id", "id"),
)

reports_table = sa.Table(
    "tandem_reports",
    metadata,
    sa.Column(
        "job_id",
        sa.String(128),
        sa.ForeignKey("tandem_jobs.job_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    sa.Column("seq", sa.BigInteger, primary_key=True, autoincrement=False),
    sa.Column("rank", sa.Integer, nullable=True),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("metrics", sa.Text, nullable=False),
    sa.Column("checkpoint_path", sa.Text, nullable=True),
)

usage_table = sa.Table(
    "tandem_usage",
    metadata,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column(
        "job_id",
        sa.String(128),
        sa.ForeignKey("tandem_jobs.job_id", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("rank", sa.Integer, nullable=False),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("cpu_percent", sa.Float, nullable=False),
    sa.Column("rss_bytes", sa.BigInteger, nullable=False),
    sa.Column("gpu_util", sa.Float, nullable=True),
    sa.Column("gpu_mem_bytes", sa.BigInteger, nullable=True),
    sa.Index("ix_tandem_usage_job_time", "job_id", "time", "rank"),
)


def _seed(conn: Connection) -> None:
    conn.execute(meta_table.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))


#: The job store's Alembic revisions; ``metadata`` above is the schema at ``head``.
LINEAGE = Lineage(
    name="job store",
    folder=folder_of(__file__),
    version_table="tandem_alembic_jobs",
    head="jobs_0001",
    baseline="jobs_0001",
    tables=("tandem_meta", "tandem_jobs"),
    advisory_lock=7460110501,
    metadata=metadata,
    after_create=_seed,
)

# Every job column but the spec: what listing loads.
_LIST_COLUMNS = [c for c in jobs_table.c if c.name != "spec"]

# --------------------------------------------------------------------------- retries


def _is_connection_error(e: exc.DBAPIError) -> bool:
    """True when the database could not be reached or the connection went away."""
    if e.connection_invalidated or isinstance(e, exc.InterfaceError):
        return True
    if not isinstance(e, exc.OperationalError):
        return False
    msg = str(getattr(e, "orig", e)).lower()
    return not any(w in msg for w in ("no such table", "no such column", "syntax error",
                                      "malformed", "not a database"))


# --------------------------------------------------------------------------- the store


class SQLJobStore(JobStore):
    """A ``JobStore`` in a SQL database: SQLite (a file) or PostgreSQL.

    Creates its tables if absent (``tandem_meta``, ``tandem_jobs``, ``tandem_job_tags``,
    ``tandem_transitions``, ``tandem_reports``, ``tandem_usage``) and migrates an older
    store's (Alembic, ``tandem.jobs.store.migrate``); several processes may open the same
    database at once, including for the first time.

    Thread safety and processes: see ``JobStore``. On SQLite every connection runs in WAL
    mode with ``synchronous=NORMAL`` (a power loss may drop the last transactions, never
    corrupt the file), ``busy_timeout``, and writes begin with ``BEGIN IMMEDIATE``; a
    call that still meets a lock is retried with backoff for up to ``retry_timeout_s``.
    A forked child drops the connections it inherited and opens its own.

    Args:
        url: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``,
            ``sqlite:///:memory:`` (one process only), ``postgresql://user@host:port/db``
            (the psycopg 3 driver is used; ``pip install "psycopg[binary]"``).
        busy_timeout_s: How long SQLite itself waits on a lock per statement.
        retry_timeout_s: How long a call keeps retrying after lock errors before raising
            ``JobStoreUnavailableError``.
        engine_kwargs: Extra keyword arguments for ``sqlalchemy.create_engine``.

    Raises:
        ConfigError: an unsupported URL.
        ImportError: PostgreSQL without psycopg installed (the message says what to install).
    """

    def __init__(
        self,
        url: str,
        *,
        busy_timeout_s: float = 5.0,
        retry_timeout_s: float = 60.0,
        engine_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self._url = normalize_url(url)
        self._retry_timeout_s = retry_timeout_s
        self._closed = False
        self._fence_epoch = None
        # One shared connection for in-memory SQLite, so calls need a lock of their own.
        self._serial: threading.Lock | None = None
        opened = open_engine(self._url, busy_timeout_s=busy_timeout_s,
                             sqlite_pragmas=("synchronous = NORMAL", "foreign_keys = ON"),
                             engine_kwargs=engine_kwargs)
        self._engine: Engine = opened.engine
        self._dialect = opened.dialect
        if opened.in_memory:
            self._serial = threading.Lock()
        self._ensure_schema()

    def __repr__(self) -> str:
        shown = self._engine.url.render_as_string(hide_password=True)
        return f"SQLJobStore({shown!r})"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL in use, password hidden."""
        return self._engine.url.render_as_string(hide_password=True)

    @property
    def engine(self) -> Engine:
        """The SQLAlchemy engine (for tests and maintenance tools)."""
        return self._engine

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._engine.dispose()

    # ----------------------------------------------------------------- plumbing

    @contextmanager
    def _transaction(self, write: bool) -> Iterator[Connection]:
        serial = self._serial if self._serial is not None else nullcontext()
        with serial, transaction(self._engine, write) as conn:
            if write and self._fence_epoch is not None:
                self._check_fence(conn, self._fence_epoch)
            yield conn

    # ----------------------------------------------------------------- fencing

    def _epoch_query(self, *, lock: bool, share: bool = False) -> Any:
        q = sa.select(meta_table.c.value).where(meta_table.c.key == "owner_epoch")
        if lock and self._dialect == "postgresql":
            # FOR SHARE: writers of one owner run side by side; a new owner's FOR UPDATE
            # waits for them, and every write that starts after it sees the new epoch.
            q = q.with_for_update(read=share)
        return q

    def _check_fence(self, conn: Connection, epoch: int) -> None:
        found = conn.execute(self._epoch_query(lock=True, share=True)).scalar_one_or_none()
        if int(found or 0) != epoch:
            raise StoreFencedError(
                f"{self!r}: this server owned the store as epoch {epoch}, but another "
                f"server took it since (epoch {found}); nothing was written. This server "
                f"must not write to the store any more: stop it (the other one runs its "
                f"jobs now)."
            )

    def take_ownership(self) -> tuple[int, int]:
        def fn(conn: Connection) -> tuple[int, int]:
            found = conn.execute(self._epoch_query(lock=True)).scalar_one_or_none()
            previous = int(found or 0)
            if found is None:
                conn.execute(meta_table.insert().values(key="owner_epoch", value="1"))
            else:
                conn.execute(meta_table.update().where(meta_table.c.key == "owner_epoch")
                             .values(value=str(previous + 1)))
            return previous, previous + 1

        self._fence_epoch = None  # the bump itself is not fenced by an older epoch
        previous, new = self._run(fn, write=True)
        self._fence_epoch = new
        return previous, new

    def owner_epoch(self) -> int:
        def fn(conn: Connection) -> int:
            return int(conn.execute(self._epoch_query(lock=False)).scalar_one_or_none() or 0)

        return self._run(fn, write=False)

    def _run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        """Runs ``fn`` in one short transaction, retrying it on lock errors."""
        if self._closed:
            raise JobStoreUnavailableError(
                f"{self!r} is closed; open a new store with open_store(url)"
            )
        deadline = time.monotonic() + self._retry_timeout_s
        delay = 0.005
        attempts = 0
        while True:
            attempts += 1
            try:
                with self._transaction(write) as conn:
                    return fn(conn)
            except exc.IntegrityError:
                raise
            except exc.DBAPIError as e:
                # A dropped connection is safe to retry for reads only (once: the pool
                # reconnects): a write might have committed before the connection went away.
                dropped = e.connection_invalidated and not write and attempts < 2
                if not (is_lock_error(e) or dropped):
                    raise self._store_error(e, write) from e
                if time.monotonic() >= deadline:
                    raise JobStoreUnavailableError(
                        f"{self!r}: the database stayed locked/unavailable for "
                        f"{self._retry_timeout_s:.0f} s ({attempts} attempts; last error: "
                        f"{getattr(e, 'orig', e)}); another process may hold a long "
                        f"transaction on it. Raise SQLJobStore(retry_timeout_s=...) or use "
                        f"PostgreSQL for heavy concurrent writes."
                    ) from e
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    def _store_error(self, e: exc.DBAPIError, write: bool) -> Exception:
        """A driver error as a store error that names the store: unreachable (connection
        refused or lost: ``JobStoreUnavailableError``) or anything else (``JobStoreError``)."""
        orig = getattr(e, "orig", None) or e
        text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
        if _is_connection_error(e):
            maybe = (" (the write may or may not have been committed)" if write and
                     e.connection_invalidated else "")
            return JobStoreUnavailableError(
                f"{self!r} is unreachable: {text}{maybe}. Check that the database runs and "
                f"accepts connections."
            )
        return JobStoreError(f"{self!r} failed: {type(orig).__name__}: {text}")

    def _ensure_schema(self) -> None:
        """Creates the tables in a new database, or migrates an older store's to this
        tandem's schema (``tandem.jobs.store.migrate``)."""
        migrate(lambda fn, write: self._run(fn, write=write), LINEAGE,
                dialect=self._dialect, store=repr(self))

    # ----------------------------------------------------------------- row mapping

    @staticmethod
    def _job_from_row(row: Row[object], *, with_spec: bool) -> JobRecord:
        m = row._mapping
        return JobRecord(
            job_id=m["job_id"],
            name=m["name"],
            state=m["state"],
            submitted_at=m["submitted_at"],
            priority=m["priority"],
            tags=tuple(decode_json(m["tags"])),
            started_at=m["started_at"],
            ended_at=m["ended_at"],
            spec=(bytes(m["spec"]) if m["spec"] is not None else None) if with_spec else None,
            spec_json=decode_json(m["spec_json"]),
            error=m["error"],
            traceback=m["traceback"],
            result=decode_json(m["result"]),
        )

    @staticmethod
    def _encode_job_fields(fields: dict[str, Any]) -> dict[str, object]:
        out = dict(fields)
        if "tags" in out:
            out["tags"] = encode_json(list(out["tags"]))
        if "spec_json" in out:
            out["spec_json"] = encode_json(out["spec_json"])
        if "result" in out:
            out["result"] = None if out["result"] is None else encode_json(out["result"])
        return out

    # ----------------------------------------------------------------- jobs

    def create_job(self, record: JobRecord) -> None:
        check_json_dict(record.spec_json, "JobRecord.spec_json")
        check_json_dict(record.result, "JobRecord.result", allow_none=True)
        row = self._encode_job_fields(
            {
                "job_id": record.job_id,
                "name": record.name,
                "state": record.state,
                "priority": record.priority,
                "tags": record.tags,
                "submitted_at": record.submitted_at,
                "started_at": record.started_at,
                "ended_at": record.ended_at,
                "spec": record.spec,
                "spec_json": record.spec_json,
                "error": record.error,
                "traceback": record.traceback,
                "result": record.result,
            }
        )
        tag_rows = [{"job_id": record.job_id, "tag": t} for t in dict.fromkeys(record.tags)]

        def fn(conn: Connection) -> None:
            try:
                conn.execute(jobs_table.insert(), row)
            except exc.IntegrityError as e:
                raise DuplicateJobError(
                    f"a job with id {record.job_id!r} already exists in {self!r}; "
                    f"give each job a fresh id (tandem._core.ids.new_id('job_'))"
                ) from e
            if tag_rows:
                conn.execute(tags_table.insert(), tag_rows)
            conn.execute(
                transitions_table.insert(),
                {
                    "job_id": record.job_id,
                    "from_state": None,
                    "to_state": record.state,
                    "time": record.submitted_at,
                    "reason": None,
                },
            )

        self._run(fn, write=True)

    def update_job(self, job_id: str, **fields: object) -> None:
        changes = check_update_fields(job_id, fields)
        if not changes:
            if self.get_job(job_id) is None:
                raise job_not_found(job_id, self)
            return
        values = self._encode_job_fields(changes)

        def fn(conn: Connection) -> None:
            res = conn.execute(
                jobs_table.update().where(jobs_table.c.job_id == job_id).values(**values)
            )
            if res.rowcount == 0:
                raise job_not_found(job_id, self)
            if "tags" in changes:
                conn.execute(tags_table.delete().where(tags_table.c.job_id == job_id))
                tag_rows = [{"job_id": job_id, "tag": t} for t in dict.fromkeys(changes["tags"])]
                if tag_rows:
                    conn.execute(tags_table.insert(), tag_rows)

        self._run(fn, write=True)

    def set_state(
        self,
        job_id: str,
        state: str,
        at: float,
        error: str | None = None,
        *,
        traceback: str | None = None,
        reason: str | None = None,
    ) -> JobRecord:
        check_state_args(state, at)

        def fn(conn: Connection) -> JobRecord:
            row = conn.execute(
                sa.select(*_LIST_COLUMNS).where(jobs_table.c.job_id == job_id).with_for_update()
            ).first()
            if row is None:
                raise job_not_found(job_id, self)
            old = self._job_from_row(row, with_spec=False)
            changes: dict[str, Any] = {"state": state}
            if state == RUNNING_STATE and old.started_at is None:
                changes["started_at"] = at
            if state in TERMINAL_STATES and old.ended_at is None:
                changes["ended_at"] = at
            if error is not None:
                changes["error"] = error
            if traceback is not None:
                changes["traceback"] = traceback
            conn.execute(jobs_table.update().where(jobs_table.c.job_id == job_id).values(**changes))
            conn.execute(
                transitions_table.insert(),
                {
                    "job_id": job_id,
                    "from_state": old.state,
                    "to_state": state,
                    "time": at,
                    "reason": reason if reason is not None else error,
                },
            )
            return dataclasses.replace(old, **changes)

        return self._run(fn, write=True)

    def get_job(self, job_id: str) -> JobRecord | None:
        def fn(conn: Connection) -> JobRecord | None:
            row = conn.execute(sa.select(jobs_table).where(jobs_table.c.job_id == job_id)).first()
            return None if row is None else self._job_from_row(row, with_spec=True)

        return self._run(fn, write=False)

    def list_jobs(
        self,
        states: str | Iterable[str] | None = None,
        name: str | None = None,
        tag: str | None = None,
        limit: int = 100,
        offset: int = 0,
        order: Order = "desc",
    ) -> list[JobRecord]:
        check_list_args(limit, offset, order)
        wanted = states_filter(states)
        query = sa.select(*_LIST_COLUMNS)
        if wanted is not None:
            query = query.where(jobs_table.c.state.in_(wanted))
        if name is not None:
            query = query.where(jobs_table.c.name == name)
        if tag is not None:
            query = query.where(
                sa.exists().where(
                    (tags_table.c.job_id == jobs_table.c.job_id) & (tags_table.c.tag == tag)
                )
            )
        if order == "desc":
            query = query.order_by(jobs_table.c.submitted_at.desc(), jobs_table.c.job_id.desc())
        else:
            query = query.order_by(jobs_table.c.submitted_at.asc(), jobs_table.c.job_id.asc())
        query = query.limit(limit).offset(offset)

        def fn(conn: Connection) -> list[JobRecord]:
            return [self._job_from_row(r, with_spec=False) for r in conn.execute(query)]

        return self._run(fn, write=False)

    # ----------------------------------------------------------------- reports

    def append_reports(self, job_id: str, reports: Sequence[ReportRecord]) -> None:
        rows = []
        seen: set[int] = set()
        for r in reports:
            if r.job_id != job_id:
                raise ValueError(
                    f"append_reports({job_id!r}, ...) got a report of job {r.job_id!r} "
                    f"(seq {r.seq}); append each job's reports in its own call"
                )
            if r.seq in seen:
                raise DuplicateReportError(
                    f"the batch for job {job_id!r} has seq {r.seq} twice; report seqs must "
                    f"be unique per job (nothing of this batch was stored)"
                )
            seen.add(r.seq)
            check_json_dict(r.metrics, f"ReportRecord.metrics (seq {r.seq})")
            rows.append(
                {
                    "job_id": job_id,
                    "seq": r.seq,
                    "rank": r.rank,
                    "time": r.time,
                    "metrics": encode_json(r.metrics),
                    "checkpoint_path": r.checkpoint_path,
                }
            )

        def fn(conn: Connection) -> None:
            self._require_jobs(conn, [job_id])
            if not rows:
                return
            try:
                conn.execute(reports_table.insert(), rows)
            except exc.IntegrityError as e:
                raise DuplicateReportError(
                    f"job {job_id!r} already has a report with one of the seqs "
                    f"{rows[0]['seq']}..{rows[-1]['seq']}; report seqs must be unique per job "
                    f"(nothing of this batch was stored)"
                ) from e

        self._run(fn, write=True)

    def _require_jobs(self, conn: Connection, job_ids: Iterable[str]) -> None:
        wanted = set(job_ids)
        found = set(
            conn.execute(
                sa.select(jobs_table.c.job_id).where(jobs_table.c.job_id.in_(wanted))
            ).scalars()
        )
        missing = wanted - found
        if missing:
            raise job_not_found(min(missing), self)

    def get_reports(
        self,
        job_id: str,
        after_seq: int = -1,
        limit: int = 1000,
        *,
        with_checkpoint: bool = False,
    ) -> list[ReportRecord]:
        check_list_args(limit, 0, "asc")
        t = reports_table
        query = sa.select(t).where((t.c.job_id == job_id) & (t.c.seq > after_seq))
        if with_checkpoint:
            query = query.where(t.c.checkpoint_path.is_not(None))
        query = query.order_by(t.c.seq).limit(limit)

        def fn(conn: Connection) -> list[ReportRecord]:
            return [
                ReportRecord(
                    job_id=job_id,
                    seq=r.seq,
                    metrics=decode_json(r.metrics),
                    time=r.time,
                    rank=r.rank,
                    checkpoint_path=r.checkpoint_path,
                )
                for r in conn.execute(query)
            ]

        return self._run(fn, write=False)

    def transitions(self, job_id: str) -> list[TransitionRecord]:
        t = transitions_table
        query = sa.select(t).where(t.c.job_id == job_id).order_by(t.c.id)

        def fn(conn: Connection) -> list[TransitionRecord]:
            return [
                TransitionRecord(job_id, r.from_state, r.to_state, r.time, r.reason)
                for r in conn.execute(query)
            ]

        return self._run(fn, write=False)

    # ----------------------------------------------------------------- usage

    def append_usage(self, samples: Sequence[UsageSample]) -> None:
        if not samples:
            return
        rows = [
            {
                "job_id": s.job_id,
                "rank": s.rank,
                "time": s.time,
                "cpu_percent": s.cpu_percent,
                "rss_bytes": s.rss_bytes,
                "gpu_util": s.gpu_util,
                "gpu_mem_bytes": s.gpu_mem_bytes,
            }
            for s in samples
        ]

        def fn(conn: Connection) -> None:
            self._require_jobs(conn, {s.job_id for s in samples})
            conn.execute(usage_table.insert(), rows)

        self._run(fn, write=True)

    def get_usage(
        self,
        job_id: str,
        *,
        rank: int | None = None,
        since: float | None = None,
        limit: int = 10_000,
    ) -> list[UsageSample]:
        check_list_args(limit, 0, "asc")
        t = usage_table
        query = sa.select(t).where(t.c.job_id == job_id)
        if rank is not None:
            query = query.where(t.c.rank == rank)
        if since is not None:
            query = query.where(t.c.time > since)
        query = query.order_by(t.c.time, t.c.rank, t.c.id).limit(limit)

        def fn(conn: Connection) -> list[UsageSample]:
            return [
                UsageSample(
                    job_id=job_id,
                    rank=r.rank,
                    time=r.time,
                    cpu_percent=r.cpu_percent,
                    rss_bytes=r.rss_bytes,
                    gpu_util=r.gpu_util,
                    gpu_mem_bytes=r.gpu_mem_bytes,
                )
                for r in conn.execute(query)
            ]

        return self._run(fn, write=False)
