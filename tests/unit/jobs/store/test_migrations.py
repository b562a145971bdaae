"""Schema migrations (Alembic) of the three SQL stores: jobs, users, model registry.

A store written before tandem used Alembic (``data/pre_alembic_*.sql``: dumps of what
tandem wrote at commit fc1ac24) opens with every row kept; the revisions, run from the
first, give exactly the tables a new database gets; a later revision really runs on an
older store (SQLite and PostgreSQL); a store written by a newer tandem is refused untouched.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tandem._core.errors import ConfigError
from tandem.jobs.store import open_store
from tandem.jobs.store import sql as jobs_sql
from tandem.jobs.store.engine import normalize_url, open_engine, transaction
from tandem.jobs.store.migrate import Lineage, migrate, script_heads, upgrade_with_alembic
from tandem.model.registry import _store as registry_store
from tandem.server import users as users_store

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
LINEAGES = [jobs_sql.LINEAGE, users_store.LINEAGE, registry_store.LINEAGE]
HEADS = {lin.version_table: lin.head for lin in LINEAGES}


def _load_dump(path: str, dump: str) -> None:
    conn = sqlite3.connect(path)
    with open(os.path.join(DATA, dump)) as f:
        conn.executescript(f.read())
    conn.close()


def _runner(url: str) -> tuple[Callable[..., Any], sa.engine.Engine]:
    engine = open_engine(normalize_url(url), busy_timeout_s=10).engine

    def run(fn: Callable[[Connection], Any], write: bool) -> Any:
        with transaction(engine, write) as conn:
            return fn(conn)

    return run, engine


def _versions(url: str) -> dict[str, str]:
    run, engine = _runner(url)
    try:
        def read(conn: Connection) -> dict[str, str]:
            have = set(sa.inspect(conn).get_table_names())
            return {t: conn.execute(sa.text(f"SELECT version_num FROM {t}")).scalar_one()
                    for t in HEADS if t in have}

        return dict(run(read, False))
    finally:
        engine.dispose()


@pytest.mark.parametrize("dump", ["pre_alembic_server.sql", "pre_alembic_jobs_only.sql"])
def test_a_store_written_before_alembic_opens_with_every_row(tmp_path, dump):
    db = str(tmp_path / "jobs.db")
    _load_dump(db, dump)
    url = f"sqlite:///{db}"
    server = dump == "pre_alembic_server.sql"
    for again in (False, True):  # the second open finds the head: nothing to do
        with open_store(url) as store:
            job = store.require_job("job_old")
            assert (job.name, job.state, job.priority, job.tags, job.spec_json) == (
                "old run", "RUNNING", 3, ("a", "b"), {"num_workers": 2})
            assert store.require_job("job_old").spec == b"\x80spec"
            assert [(t.from_state, t.to_state, t.reason) for t in store.transitions("job_old")
                    ] == [(None, "QUEUED", None), ("QUEUED", "RUNNING", "started")]
            assert [(r.seq, r.metrics, r.checkpoint_path) for r in
                    store.get_reports("job_old")] == [(0, {"loss": 0.5}, "/ck/0")]
            assert [u.rss_bytes for u in store.get_usage("job_old")] == [1000]
            assert [j.job_id for j in store.list_jobs(tag="b")] == ["job_old"]
            assert store.checkpoint_paths("job_old") == ["/ck/0"]
        accounts = users_store.AccountStore(url)
        models = registry_store.ModelStore(url, str(tmp_path / "models"))
        try:
            users = {u["name"]: u["role"] for u in accounts.users()}
            assert users == {"admin": "admin", **({"alice": "member"} if server else {}),
                             **({"bob": "viewer"} if again else {})}
            assert accounts.owner("job", "job_old") == ("alice" if server else None)
            assert [(e.user, e.action) for e in accounts.audit_log()] == (
                [("alice", "submit")] if server else [])
            assert accounts.quotas() == ({"alice": {"cpus": 2.0}} if server else {})
            got = [(v.name, v.version, v.metrics, v.aliases) for v in models.versions("digits")
                   ] if server else []
            assert got == ([("digits", 1, {"acc": 0.9}, ["prod"])] if server else [])
            if not again:  # the stores still write
                accounts.add_user("bob", "viewer")
        finally:
            accounts.close()
            models.close()
        assert _versions(url) == HEADS


def test_a_newer_stores_revision_is_refused_untouched(tmp_path):
    db = tmp_path / "jobs.db"
    url = f"sqlite:///{db}"
    open_store(url).close()
    conn = sqlite3.connect(db)
    conn.execute("UPDATE tandem_alembic_jobs SET version_num = 'jobs_9999'")
    conn.commit()
    conn.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    with pytest.raises(ConfigError, match=r"schema revision 'jobs_9999', which this tandem "
                                          r"does not know.*newer tandem.*Nothing was changed"):
        open_store(url)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


def _schema_diff(conn: Connection, lineage: Lineage) -> list[Any]:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    def ours(name: str | None, kind: str, parents: dict[str, str | None]) -> bool:
        if kind == "schema":
            return True
        table = name if kind == "table" else parents.get("table_name")
        return table in lineage.metadata.tables  # (a database holds other stores' too)

    ctx = MigrationContext.configure(conn, opts={"compare_type": True, "include_name": ours})
    return list(compare_metadata(ctx, lineage.metadata))


def _check_revisions_give_the_tables(url: str) -> None:
    run, engine = _runner(url)
    try:
        for lineage in LINEAGES:
            assert script_heads(lineage) == (lineage.head,), lineage.name
            run(lambda conn, lin=lineage: upgrade_with_alembic(conn, lin, "test"), True)
            assert run(lambda conn, lin=lineage: _schema_diff(conn, lin), False) == []
    finally:
        engine.dispose()
    assert _versions(url) == HEADS


def test_the_revisions_give_the_tables_a_new_database_gets(tmp_path):
    _check_revisions_give_the_tables(f"sqlite:///{tmp_path / 'revisions.db'}")


# A later revision, as the next schema change will add one: a column with a value derived
# from the rows already there.
_NEXT = '''
import sqlalchemy as sa
from alembic import op

revision = "jobs_0002"
down_revision = "jobs_0001"


def upgrade():
    with op.batch_alter_table("tandem_jobs") as batch:
        batch.add_column(sa.Column("note", sa.Text, nullable=True))
    op.execute("UPDATE tandem_jobs SET note = 'was ' || state")
'''


def _next_lineage(tmp_path: Any) -> Lineage:
    folder = tmp_path / "revisions"
    shutil.copytree(jobs_sql.LINEAGE.folder, folder,
                    ignore=shutil.ignore_patterns("__pycache__"))
    (folder / "jobs_0002_note.py").write_text(_NEXT)
    return dataclasses.replace(jobs_sql.LINEAGE, folder=str(folder), head="jobs_0002")


def _check_a_later_revision_runs(url: str, lineage: Lineage) -> None:
    run, engine = _runner(url)
    try:
        before = migrate(run, lineage, dialect=engine.dialect.name, store="test")
        notes = run(lambda conn: conn.execute(
            sa.text("SELECT job_id, note FROM tandem_jobs")).all(), False)
    finally:
        engine.dispose()
    assert before == "pre-alembic"
    assert [tuple(r) for r in notes] == [("job_old", "was RUNNING")]
    assert _versions(url)["tandem_alembic_jobs"] == "jobs_0002"
    # today's tandem does not know jobs_0002: it refuses the store a newer tandem upgraded
    with pytest.raises(ConfigError, match="'jobs_0002', which this tandem does not know"):
        open_store(url)


def test_a_later_revision_runs_on_a_store_written_before_alembic(tmp_path):
    db = tmp_path / "jobs.db"
    _load_dump(str(db), "pre_alembic_server.sql")
    url = f"sqlite:///{db}"
    _check_a_later_revision_runs(url, _next_lineage(tmp_path))


def _write_pre_alembic_store(url: str) -> None:
    """What tandem wrote before Alembic: ``create_all`` and ``schema_version`` 1."""
    run, engine = _runner(url)
    try:
        def write(conn: Connection) -> None:
            jobs_sql.metadata.create_all(conn)
            conn.execute(jobs_sql.meta_table.insert().values(key="schema_version", value="1"))
            conn.execute(jobs_sql.jobs_table.insert().values(
                job_id="job_old", name="old run", state="RUNNING", priority=3,
                tags='["a","b"]', submitted_at=1.0, spec_json="{}"))
            users = users_store.LINEAGE  # its baseline's tables: groups came with users_0002
            users.metadata.create_all(conn, tables=[users.metadata.tables[t] for t in users.tables])

        run(write, True)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_migrations_on_postgresql(tmp_path, postgres_database_url):
    _check_revisions_give_the_tables(postgres_database_url)
    # a database of today's schema (before Alembic), upgraded by a later revision
    run, engine = _runner(postgres_database_url)
    try:
        def drop_all(conn: Connection) -> None:
            for table in sa.inspect(conn).get_table_names():
                conn.execute(sa.text(f'DROP TABLE IF EXISTS "{table}" CASCADE'))

        run(drop_all, True)
    finally:
        engine.dispose()
    _write_pre_alembic_store(postgres_database_url)
    _check_a_later_revision_runs(postgres_database_url, _next_lineage(tmp_path))
    accounts = users_store.AccountStore(postgres_database_url)
    try:
        assert accounts.quotas() == {}
    finally:
        accounts.close()
    assert _versions(postgres_database_url)["tandem_alembic_users"] == users_store.LINEAGE.head


_OPEN_ALL = '''
import sys
from tandem.jobs.store import open_store
from tandem.model.registry._store import ModelStore
from tandem.server.users import AccountStore
url, models = sys.argv[1], sys.argv[2]
open_store(url).close()
AccountStore(url).close()
ModelStore(url, models).close()
'''


def test_processes_opening_an_old_store_at_once_migrate_it_once(tmp_path):
    import subprocess
    import sys

    db = tmp_path / "jobs.db"
    _load_dump(str(db), "pre_alembic_server.sql")
    url = f"sqlite:///{db}"
    procs = [subprocess.Popen([sys.executable, "-c", _OPEN_ALL, url, str(tmp_path / "models")],
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [p.communicate(timeout=240)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    assert _versions(url) == HEADS
    conn = sqlite3.connect(db)
    try:
        counts = [conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in HEADS]
        jobs = conn.execute("SELECT job_id FROM tandem_jobs").fetchall()
    finally:
        conn.close()
    assert counts == [1, 1, 1] and jobs == [("job_old",)]
