"""The local registry read with the stdlib's ``sqlite3`` (``_record.read_sqlite``): the same
records ``ModelStore`` finds, None (the full store answers) for anything unexpected, and
``model.registry.resolve`` in a fresh program imports no SQLAlchemy."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from tandem.model.registry import ModelRef
from tandem.model.registry._record import HEAD, read_sqlite
from tandem.model.registry._store import ModelStore

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "src")


@pytest.fixture
def store(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    s = ModelStore("sqlite:///" + str(root / "registry.db"), str(root / "files"))
    src = tmp_path / "src"
    src.mkdir()
    (src / "weights.bin").write_bytes(b"w")
    s.add("m", str(src), {"config": {"width": 3}, "metrics": {"loss": 0.5}})
    s.add("m", str(src), {"config": {"width": 4}, "tags": {"team": "x"}})
    s.add("other", str(src), {})
    s.set_alias("m", "prod", 1)
    s.set_alias("m", "canary", 1)
    yield s, str(root / "registry.db")
    s.close()


@pytest.mark.parametrize("ref", ["m", "m@1", "m@2", "m@prod", "m@canary", "other"])
def test_the_stdlib_reader_finds_what_the_store_finds(store, ref):
    s, db = store
    assert read_sqlite(db, ModelRef.parse(ref)) == s.resolve(ref)


def test_the_stdlib_reader_leaves_anything_unexpected_to_the_store(store, tmp_path):
    s, db = store
    for missing in ("nosuch", "m@3", "m@staging"):  # the store explains what exists
        assert read_sqlite(db, ModelRef.parse(missing)) is None
    assert read_sqlite(str(tmp_path / "none.db"), ModelRef("m")) is None  # no file yet
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE tandem_alembic_registry SET version_num = 'registry_0000'")
    conn.close()
    assert read_sqlite(db, ModelRef("m")) is None  # an older schema: the store migrates it
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE tandem_alembic_registry SET version_num = ?", (HEAD,))
        conn.execute("ALTER TABLE tandem_model_versions RENAME COLUMN meta TO meta_old")
    conn.close()
    assert read_sqlite(db, ModelRef("m")) is None  # a schema it does not know


PROGRAM = """
import json, sys
from tandem.model import registry
from tandem.model.registry import ModelNotFoundError
rec = registry.resolve("m@prod")
out = {"record": [rec.name, rec.version, rec.config, rec.aliases],
       "sql": [m for m in ("sqlalchemy", "alembic") if m in sys.modules]}
try:
    registry.resolve("nosuch")
except ModelNotFoundError as e:
    out["missing"] = str(e)
print(json.dumps(out))
"""


def test_resolve_in_a_fresh_program_reads_the_local_registry_without_sqlalchemy(store,
                                                                                 tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("TANDEM_ADDRESS",
                                                             "TANDEM_MODELS_STORAGE")}
    env.update({"PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
                "TANDEM_ADDRESS": "local", "TANDEM_MODELS_PATH": str(tmp_path / "models"),
                "TANDEM_EARLY_IMPORT": "0", "TANDEM_HOME": str(tmp_path / "home")})
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["record"] == ["m", 1, {"width": 3}, ["canary", "prod"]]
    assert out["sql"] == []  # found with the stdlib's sqlite3
    # a name it does not have: the full store answers, listing what is registered
    assert "no model named 'nosuch'" in out["missing"] and "m, other" in out["missing"]
