"""``VersionRecord`` (one stored version), and reading one from a local registry's SQLite file
with the standard library's ``sqlite3``: ``model.serve("digits@1")`` and its replicas then
find a version without importing SQLAlchemy (~0.25 s of a warm first deployment). The
reader is read-only and knows the schema at the registry's Alembic ``HEAD`` only; anything
else (no file yet, an older or newer schema, a lock it cannot wait out, a name it does not
find) answers None, and the caller asks ``ModelStore``, which migrates, waits and explains.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any

from tandem.model.registry._ref import ModelRef

#: The registry schema's Alembic head (``_store.LINEAGE``): the one schema read here.
HEAD = "registry_0001"
#: What a version's ``meta`` column holds (JSON), each a dict.
META_KEYS = ("config", "metrics", "lineage", "environment", "model_class", "tags")


@dataclass
class VersionRecord:
    """One stored version. ``location`` is where its files are (a folder or a URL)."""

    name: str
    version: int
    created: float
    location: str
    config: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)
    lineage: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)
    model_class: dict[str, Any] = field(default_factory=dict)
    tags: dict[str, Any] = field(default_factory=dict)
    aliases: list[str] = field(default_factory=list)

    @property
    def ref(self) -> ModelRef:
        return ModelRef(self.name, self.version)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> VersionRecord:
        keys = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in keys})


def record_of(name: str, version: int, created: float, location: str, meta: str,
              aliases: list[str]) -> VersionRecord:
    """The record of one ``tandem_model_versions`` row and its aliases."""
    fields = json.loads(meta)
    record = VersionRecord(name=name, version=int(version), created=float(created),
                           location=location, aliases=sorted(aliases))
    for key in META_KEYS:
        setattr(record, key, fields.get(key) or {})
    return record


def read_sqlite(db_path: str, ref: ModelRef, busy_timeout_s: float = 10.0
                ) -> VersionRecord | None:
    """The version ``ref`` names in the SQLite registry file ``db_path`` (as
    ``ModelStore.resolve`` finds it: a number, an alias, or the latest version), read with
    ``sqlite3`` in read-only mode; None when it is not there or anything is unexpected
    (see the module docstring)."""
    if not os.path.isfile(db_path):
        return None
    uri = "file:" + urllib.parse.quote(os.path.abspath(db_path)) + "?mode=ro"
    try:
        conn = sqlite3.connect(uri, uri=True, timeout=busy_timeout_s)
    except sqlite3.Error:
        return None
    try:
        # one read transaction: the rows agree with each other, as in ModelStore
        conn.execute("BEGIN")
        heads = conn.execute("SELECT version_num FROM tandem_alembic_registry").fetchall()
        if heads != [(HEAD,)]:
            return None  # older (to migrate) or newer than this code: ModelStore decides
        aliases: dict[int, list[str]] = {}
        for alias, version in conn.execute(
                "SELECT alias, version FROM tandem_model_aliases WHERE name = ?", (ref.name,)):
            aliases.setdefault(int(version), []).append(alias)
        cols = "name, version, created, location, meta"
        if ref.alias is not None:
            matches = [v for v, names in aliases.items() if ref.alias in names]
            if not matches:
                return None
            row = conn.execute(f"SELECT {cols} FROM tandem_model_versions "  # noqa: S608
                               f"WHERE name = ? AND version = ?",
                               (ref.name, matches[0])).fetchone()
        elif ref.version is None:
            row = conn.execute(f"SELECT {cols} FROM tandem_model_versions "  # noqa: S608
                               f"WHERE name = ? ORDER BY version DESC LIMIT 1",
                               (ref.name,)).fetchone()
        else:
            row = conn.execute(f"SELECT {cols} FROM tandem_model_versions "  # noqa: S608
                               f"WHERE name = ? AND version = ?",
                               (ref.name, ref.version)).fetchone()
        if row is None:
            return None
        name, version, created, location, meta = row
        return record_of(name, version, created, location, meta,
                         aliases.get(int(version), []))
    except (sqlite3.Error, ValueError, TypeError, AttributeError):
        return None  # a schema or row this reader does not know: ModelStore reads it
    finally:
        conn.close()
