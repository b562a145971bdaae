"""Schema migrations (Alembic) for the stores tandem keeps in a SQL database.

Each store has its own line of revisions and its own version table, because a database can
hold any of them alone (a job store from ``open_store``, a local model registry) or several
together (a train server's database holds the jobs, users and registry tables):

============  ===============================================  =========================
store          revisions                                       version table
============  ===============================================  =========================
jobs          ``tandem/jobs/store/migrations/``                ``tandem_alembic_jobs``
users         ``tandem/server/migrations/``                    ``tandem_alembic_users``
registry      ``tandem/model/registry/migrations/``            ``tandem_alembic_registry``
============  ===============================================  =========================

A store calls :func:`migrate` when it opens its database:

- the version table holds this tandem's head revision: nothing to do (one query; Alembic
  is not even imported, so opening a current store stays fast);
- no version table and none of the store's tables (a new database): the tables of the
  head schema are created at once (``metadata.create_all``) and the head is stamped, as
  Alembic advises (a test checks that the revisions, run from the first, give the same
  schema);
- no version table but the store's tables are there (written before tandem used Alembic:
  the baseline revision's schema): the baseline is stamped, then the later revisions run;
- a revision this tandem does not know (written by a newer tandem): refused, nothing changed.

Everything happens in one writing transaction (SQLite ``BEGIN IMMEDIATE``; on PostgreSQL
under an advisory lock), so processes opening the same database at once migrate it once.

A new revision: add a file to the store's ``migrations/`` folder whose ``down_revision`` is
the current head, set the store's ``Lineage.head`` to it and change its tables (its
``metadata``) to match (tests check both).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tandem._core.errors import ConfigError

__all__ = ["Lineage", "current_revision", "migrate", "script_heads"]


@dataclass(frozen=True)
class Lineage:
    """One store's line of revisions."""

    name: str
    """What an error calls the store ("job store", ...)."""
    folder: str
    """The folder holding the revision files."""
    version_table: str
    head: str
    """The newest revision: the schema this tandem reads and writes."""
    baseline: str
    """The first revision: the schema stores had before tandem used Alembic."""
    tables: tuple[str, ...]
    """The baseline's tables: any of them present without a version table means a store
    written before Alembic, which the baseline is stamped on."""
    advisory_lock: int
    """PostgreSQL advisory lock key that serialises concurrent migrations of this line."""
    metadata: sa.MetaData
    """The store's tables at ``head`` (what a new database gets at once)."""
    after_create: Callable[[Connection], None] | None = None
    """Rows a new database starts with (as the revisions insert them)."""


# Alembic's ``op`` and ``context`` proxies are module globals: one migration at a time per
# process (databases differ, but the proxies do not).
_LOCK = threading.Lock()


def folder_of(module_file: str) -> str:
    """The ``migrations`` folder beside a store's module (``__file__``)."""
    return os.path.join(os.path.dirname(os.path.abspath(module_file)), "migrations")


def current_revision(conn: Connection, lineage: Lineage) -> str | None:
    """The revision the database is at for ``lineage``, or None without a version table."""
    if not sa.inspect(conn).has_table(lineage.version_table):
        return None
    rows = conn.execute(sa.text(f"SELECT version_num FROM {lineage.version_table}")).all()
    return rows[0][0] if len(rows) == 1 else None


def script_heads(lineage: Lineage) -> tuple[str, ...]:
    """The head revision(s) of ``lineage``'s revision files (for tests and tools)."""
    return tuple(_script(lineage).get_heads())


def _script(lineage: Lineage) -> Any:
    from alembic.script import ScriptDirectory

    return ScriptDirectory(lineage.folder, version_locations=[lineage.folder])


def migrate(
    run: Callable[[Callable[[Connection], Any], bool], Any],
    lineage: Lineage,
    *,
    dialect: str,
    store: str,
) -> str:
    """Brings a store's database to ``lineage.head``; returns what it was at before: a
    revision, ``"none"`` (a new database) or ``"pre-alembic"`` (written before Alembic).

    Args:
        run: runs a function in one transaction of the store (``run(fn, write)``), with the
            store's retries on lock errors.
        dialect: ``"sqlite"`` or ``"postgresql"``.
        store: how an error names the store (its ``repr``).

    Raises:
        ConfigError: the database is at a revision this tandem does not know (a newer
            tandem wrote it); nothing was changed.
    """
    if run(lambda conn: current_revision(conn, lineage), False) == lineage.head:
        return lineage.head

    def upgrade(conn: Connection) -> str:
        if dialect == "postgresql":
            conn.execute(sa.text(f"SELECT pg_advisory_xact_lock({lineage.advisory_lock})"))
        found = current_revision(conn, lineage)  # again, now that this transaction writes
        if found == lineage.head:
            return found
        before = found or "none"
        if found is None:
            if not any(sa.inspect(conn).has_table(t) for t in lineage.tables):
                # A new database: the head schema at once, as Alembic's docs advise
                # (``create_all`` then stamp); a test checks it equals the revisions' result.
                lineage.metadata.create_all(conn)
                if lineage.after_create is not None:
                    lineage.after_create(conn)
                _stamp(conn, lineage, lineage.head)
                return before
            _stamp(conn, lineage, lineage.baseline)
            before = "pre-alembic"
            if lineage.baseline == lineage.head:
                return before
        with _LOCK:
            upgrade_with_alembic(conn, lineage, store)
        return before

    result: str = run(upgrade, True)
    return result


def _version_table(lineage: Lineage) -> sa.Table:
    # As Alembic makes it (alembic.runtime.migration.MigrationContext._version).
    return sa.Table(
        lineage.version_table, sa.MetaData(),
        sa.Column("version_num", sa.String(32), nullable=False),
        sa.PrimaryKeyConstraint("version_num", name=f"{lineage.version_table}_pkc"),
    )


def _stamp(conn: Connection, lineage: Lineage, revision: str) -> None:
    table = _version_table(lineage)
    table.create(conn)
    conn.execute(table.insert().values(version_num=revision))


def upgrade_with_alembic(conn: Connection, lineage: Lineage, store: str) -> None:
    """Runs ``lineage``'s revisions from the database's current one to the head (from the
    first, on a database without the version table)."""
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext

    script = _script(lineage)
    found = MigrationContext.configure(
        conn, opts={"version_table": lineage.version_table}).get_current_heads()
    known = {rev.revision for rev in script.walk_revisions()}
    unknown = [rev for rev in found if rev not in known]
    if unknown:
        raise ConfigError(
            f"{store} holds a {lineage.name} at schema revision {unknown[0]!r}, which this "
            f"tandem does not know (it reads revisions up to {lineage.head!r}): a newer "
            f"tandem wrote it. Nothing was changed. Use that tandem version (or newer), "
            f"or point the store at a new database."
        )

    def steps(heads: object, _ctx: object) -> Any:
        return script._upgrade_revs(lineage.head, heads)

    ctx = MigrationContext.configure(conn, opts={"version_table": lineage.version_table,
                                                 "fn": steps})
    with Operations.context(ctx):
        ctx.run_migrations()
