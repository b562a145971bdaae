"""``ModelStore``: registry rows in a SQL database, files in storage (a folder or an fsspec URL).

The same class backs the local registry (``~/.tandem/models``: ``registry.db`` + files) and
the train server's (its job-store database + ``<server storage>/models``). Its tables are
its own (``tandem_model_versions``, ``tandem_model_aliases``), created if absent and
migrated (Alembic) when older. Files of a
version live under ``<root>/<name>/<random id>/`` and are written before the row that
points at them, so a reader never sees a version whose files are incomplete, and two
processes putting the same name at once each get their own version number (the
``(name, version)`` key decides; the loser retries with the next number).
"""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import tarfile
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from tandem._core.archives import ArchiveBudget, ArchiveLimits
from tandem._core.errors import ConfigError
from tandem.jobs.store.engine import is_lock_error, normalize_url, open_engine, transaction
from tandem.jobs.store.migrate import Lineage, folder_of, migrate
from tandem.model.registry._record import HEAD, META_KEYS, VersionRecord, record_of
from tandem.model.registry._ref import (
    ModelNotFoundError,
    ModelRef,
    RegistryError,
    check_alias,
    check_name,
)

T = TypeVar("T")

_meta = sa.MetaData()
versions_table = sa.Table(
    "tandem_model_versions", _meta,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("version", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("created", sa.Float, nullable=False),
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
)
aliases_table = sa.Table(
    "tandem_model_aliases", _meta,
    sa.Column("name", sa.String(128), primary_key=True),
    sa.Column("alias", sa.String(64), primary_key=True),
    sa.Column("version", sa.Integer, nullable=False),
    sa.Column("updated", sa.Float, nullable=False),
)

#: The registry's Alembic revisions (``tandem.jobs.store.migrate``); the tables above are
#: the schema at ``head``.
LINEAGE = Lineage(
    name="model registry",
    folder=folder_of(__file__),
    version_table="tandem_alembic_registry",
    head=HEAD,
    baseline="registry_0001",
    tables=("tandem_model_versions", "tandem_model_aliases"),
    advisory_lock=7460110521,
    metadata=_meta,
)




def _is_duplicate(e: BaseException) -> bool:
    if isinstance(e, exc.IntegrityError):
        return True
    msg = str(getattr(e, "orig", e)).lower()
    return "unique" in msg or "duplicate key" in msg


def is_url(path: str) -> bool:
    return "://" in path


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts]) if is_url(root) else os.path.join(root, *parts)


class ModelStore:
    """The registry's rows and files.

    Args:
        db_url: ``sqlite:////abs/registry.db`` or ``postgresql://user@host/db``.
        storage: the folder or fsspec URL (``s3://bucket/models``) holding version files.
        storage_options: passed to fsspec for URL storage (e.g. ``endpoint_url``).
    """

    def __init__(self, db_url: str, storage: str, *,
                 storage_options: dict[str, Any] | None = None,
                 busy_timeout_s: float = 10.0) -> None:
        self.db_url = normalize_url(db_url)
        self.storage = storage if is_url(storage) else os.path.abspath(os.path.expanduser(storage))
        self.storage_options = dict(storage_options or {})
        opened = open_engine(self.db_url, busy_timeout_s=busy_timeout_s,
                             what="The model registry URL")
        if opened.in_memory:
            opened.engine.dispose()
            raise ConfigError("the model registry needs a database file or server, not an "
                              "in-memory SQLite database (other processes must see it).")
        self._engine: Engine = opened.engine
        self._dialect = opened.dialect
        self._lock = threading.Lock()
        migrate(lambda fn, write: self._run(fn, write=write), LINEAGE,
                dialect=self._dialect, store=repr(self))

    def close(self) -> None:
        self._engine.dispose()

    def __repr__(self) -> str:
        shown = self._engine.url.render_as_string(hide_password=True)
        return f"ModelStore({shown!r}, storage={self.storage!r})"

    # ----------------------------------------------------------------- plumbing
    def _run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        deadline = time.monotonic() + 60.0
        delay = 0.005
        while True:
            try:
                with transaction(self._engine, write) as conn:
                    return fn(conn)
            except exc.DBAPIError as e:
                retry = is_lock_error(e) or (
                    # two processes creating the tables at once
                    "already exists" in str(getattr(e, "orig", e)).lower())
                if not retry or time.monotonic() > deadline:
                    raise
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    def _record(self, row: Any, aliases: list[str]) -> VersionRecord:
        return record_of(row.name, row.version, row.created, row.location, row.meta, aliases)

    def _aliases(self, conn: Connection, name: str) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        rows = conn.execute(sa.select(aliases_table.c.alias, aliases_table.c.version)
                            .where(aliases_table.c.name == name))
        for alias, version in rows:
            out.setdefault(int(version), []).append(alias)
        return out

    # ----------------------------------------------------------------- files
    def _upload(self, name: str, src_dir: str) -> str:
        location = _join(self.storage, name, uuid.uuid4().hex[:16])
        if not is_url(location):
            shutil.copytree(src_dir, location)
            return location
        fs, path = self._url_fs(location)
        fs.put(src_dir.rstrip("/") + "/", path, recursive=True)
        return location

    def _url_fs(self, location: str) -> tuple[Any, str]:
        import fsspec

        fs, path = fsspec.core.url_to_fs(location, **self.storage_options)
        return fs, path

    def remove_files(self, location: str) -> None:
        try:
            if not is_url(location):
                shutil.rmtree(location, ignore_errors=True)
                return
            fs, path = self._url_fs(location)
            if fs.exists(path):
                fs.rm(path, recursive=True)
        except Exception:  # noqa: BLE001, S110 - leftovers are only wasted space
            pass

    def download(self, record: VersionRecord, dest: str) -> str:
        """Copies a version's files into the local folder ``dest`` (created)."""
        os.makedirs(dest, exist_ok=True)
        location = record.location
        if not is_url(location):
            shutil.copytree(location, dest, dirs_exist_ok=True)
            return dest
        fs, path = self._url_fs(location)
        fs.get(path.rstrip("/") + "/", dest.rstrip("/") + "/", recursive=True)
        return dest

    def tar_bytes(self, record: VersionRecord) -> bytes:
        """A version's files as a gzipped tar (what the server sends a client)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tandem-model-") as tmp:
            self.download(record, tmp)
            return pack_dir(tmp)

    # ----------------------------------------------------------------- writes
    def add(self, name: str, src_dir: str, meta: dict[str, object],
            version: int | None = None) -> VersionRecord:
        """Stores ``src_dir``'s files as a new version of ``name`` (the next number unless
        ``version`` is given) and returns its record."""
        check_name(name)
        if version is not None and (isinstance(version, bool) or not isinstance(version, int)
                                    or version < 1):
            raise ConfigError(f"version={version!r}: versions are whole numbers from 1.")
        location = self._upload(name, src_dir)
        body = json.dumps({k: meta.get(k) or {} for k in META_KEYS}, default=str)
        now = time.time()
        try:
            for _ in range(1000):
                def insert(conn: Connection) -> int:
                    if version is not None:
                        n = version
                    else:
                        top = conn.execute(sa.select(sa.func.max(versions_table.c.version))
                                           .where(versions_table.c.name == name)).scalar()
                        n = int(top or 0) + 1
                    conn.execute(versions_table.insert().values(
                        name=name, version=n, created=now, location=location, meta=body))
                    return n

                try:
                    n = self._run(insert, write=True)
                    break
                except exc.DBAPIError as e:
                    if not _is_duplicate(e):
                        raise
                    if version is not None:
                        raise RegistryError(
                            f"{name}@{version} exists already; put without version= to get "
                            f"the next number, or delete {name}@{version} first.") from None
                    time.sleep(random.random() * 0.01)
            else:  # pragma: no cover - 1000 collisions in a row
                raise RegistryError(f"could not allocate a version of {name!r}")
        except BaseException:
            self.remove_files(location)
            raise
        return self._record(_Row(name, n, now, location, body), [])

    def set_alias(self, name: str, alias: str, version: int) -> VersionRecord:
        """Points ``name@alias`` at ``version`` (moving it if it pointed elsewhere)."""
        check_alias(alias)
        record = self.resolve(ModelRef(name, int(version)))

        def fn(conn: Connection) -> None:
            conn.execute(aliases_table.delete().where(
                (aliases_table.c.name == name) & (aliases_table.c.alias == alias)))
            conn.execute(aliases_table.insert().values(
                name=name, alias=alias, version=record.version, updated=time.time()))

        self._run(fn, write=True)
        return self.resolve(record.ref)

    def remove_alias(self, name: str, alias: str) -> None:
        self._run(lambda conn: conn.execute(aliases_table.delete().where(
            (aliases_table.c.name == name) & (aliases_table.c.alias == alias))), write=True)

    def delete(self, name: str, version: int) -> VersionRecord:
        """Deletes one version (refused while an alias points at it)."""
        record = self.resolve(ModelRef(name, int(version)))
        if record.aliases:
            shown = ", ".join(f"{name}@{a}" for a in record.aliases)
            raise RegistryError(
                f"{name}@{version} is aliased ({shown}); move the alias first, e.g. "
                f"model.alias({name!r}, {record.aliases[0]!r}, OTHER_VERSION) or "
                f"`tandem models alias {name} {record.aliases[0]} OTHER_VERSION`, then delete.")

        def fn(conn: Connection) -> int:
            if conn.execute(sa.select(aliases_table.c.alias).where(
                    (aliases_table.c.name == name) & (aliases_table.c.version == version))
                    ).first() is not None:
                return -1
            return conn.execute(versions_table.delete().where(
                (versions_table.c.name == name) & (versions_table.c.version == version))).rowcount

        n = self._run(fn, write=True)
        if n == -1:
            raise RegistryError(f"{name}@{version} was just aliased; move the alias first.")
        self.remove_files(record.location)
        return record

    # ----------------------------------------------------------------- reads
    def resolve(self, ref: ModelRef | str) -> VersionRecord:
        """The record ``ref`` names: a version, an alias, or the latest version.

        Raises:
            ModelNotFoundError: the name, version or alias does not exist (the message lists
                what does).
        """
        ref = ModelRef.parse(ref)

        def fn(conn: Connection) -> tuple[Any, dict[int, list[str]], list[int]]:
            aliases = self._aliases(conn, ref.name)
            q = sa.select(versions_table).where(versions_table.c.name == ref.name)
            version = ref.version
            if ref.alias is not None:
                matches = [v for v, names in aliases.items() if ref.alias in names]
                version = matches[0] if matches else -1
            if version is None:
                row = conn.execute(q.order_by(versions_table.c.version.desc()).limit(1)).first()
            else:
                row = conn.execute(q.where(versions_table.c.version == version)).first()
            existing: list[int] = []
            if row is None:
                existing = [int(v) for (v,) in conn.execute(
                    sa.select(versions_table.c.version).where(versions_table.c.name == ref.name)
                    .order_by(versions_table.c.version))]
            return row, aliases, existing

        row, aliases, existing = self._run(fn, write=False)
        if row is not None:
            return self._record(row, aliases.get(int(row.version), []))
        if not existing:
            names = [n["name"] for n in self.names()]
            shown = ", ".join(names[:50]) + (" ..." if len(names) > 50 else "")
            raise ModelNotFoundError(
                f"no model named {ref.name!r} in the registry ({self.where()}). "
                + (f"Registered models: {shown}." if names else
                   "The registry is empty: register one with model.put(trained, name=...)."))
        versions = ", ".join(str(v) for v in existing)
        alias_list = ", ".join(f"{a}->{v}" for v, names in sorted(aliases.items()) for a in names)
        what = f"alias {ref.alias!r}" if ref.alias is not None else f"version {ref.version}"
        raise ModelNotFoundError(
            f"{ref.name!r} has no {what}. Versions: {versions}; aliases: "
            f"{alias_list or 'none'}. Use e.g. '{ref.name}@{existing[-1]}'.")

    def versions(self, name: str) -> list[VersionRecord]:
        check_name(name)

        def fn(conn: Connection) -> tuple[list[Any], dict[int, list[str]]]:
            rows = list(conn.execute(sa.select(versions_table).where(
                versions_table.c.name == name).order_by(versions_table.c.version)))
            return rows, self._aliases(conn, name)

        rows, aliases = self._run(fn, write=False)
        if not rows:
            self.resolve(ModelRef(name))  # raises, listing the names that exist
        return [self._record(r, aliases.get(int(r.version), [])) for r in rows]

    def names(self) -> list[dict[str, Any]]:
        """One dict per registered name: ``name``, ``versions``, ``latest``, ``updated``,
        ``aliases`` (alias -> version)."""
        def fn(conn: Connection) -> tuple[list[Any], list[Any]]:
            v = versions_table.c
            rows = list(conn.execute(sa.select(v.name, sa.func.count(), sa.func.max(v.version),
                                               sa.func.max(v.created))
                                     .group_by(v.name).order_by(v.name)))
            al = list(conn.execute(sa.select(aliases_table.c.name, aliases_table.c.alias,
                                             aliases_table.c.version)))
            return rows, al

        rows, al = self._run(fn, write=False)
        aliases: dict[str, dict[str, int]] = {}
        for name, alias, version in al:
            aliases.setdefault(name, {})[alias] = int(version)
        return [{"name": n, "versions": int(c), "latest": int(m), "updated": float(t),
                 "aliases": aliases.get(n, {})} for n, c, m, t in rows]

    def where(self) -> str:
        return self._engine.url.render_as_string(hide_password=True)


class _Row:
    """A row as ``_record`` reads it (for a version just inserted)."""

    def __init__(self, name: str, version: int, created: float, location: str,
                 meta: str) -> None:
        self.name, self.version, self.created = name, version, created
        self.location, self.meta = location, meta


# --------------------------------------------------------------------------- tar helpers


def pack_dir(src: str) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=1) as tar:
        for entry in sorted(os.listdir(src)):
            tar.add(os.path.join(src, entry), arcname=entry)
    return buf.getvalue()


#: What a version's files may unpack to unless the caller says otherwise.
DEFAULT_UNPACK_LIMITS = ArchiveLimits(max_bytes=16 * 2**30, max_members=100_000)


def unpack_to(data: bytes, dest: str, limits: ArchiveLimits | None = None) -> None:
    """Extracts a tar made by ``pack_dir`` into ``dest``, refusing paths that leave it and
    archives that pass ``limits`` (checked on the members' sizes before anything is
    written).

    Raises:
        ArchiveLimitError: over a limit (nothing is extracted).
        tarfile.TarError, OSError, EOFError, zlib.error: not a gzipped tar.
    """
    budget = ArchiveBudget(limits or DEFAULT_UNPACK_LIMITS, len(data), "the model's files",
                           "store large data outside the model (its weights only), or "
                           "raise the server's --max-upload-mb")
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        members = []
        for member in tar:  # headers only: the budget stops a bomb before its data is read
            budget.add(member.name, member.size if member.isfile() else 0)
            members.append(member)
        os.makedirs(dest, exist_ok=True)
        tar.extractall(dest, members=members, filter="data")
