"""The local model registry (``~/.tandem/models``, SQLite + files), with real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

from tandem import model
from tandem._core.errors import ConfigError
from tandem.model.registry import ModelNotFoundError, ModelRef, ModelStore, RegistryError
from tests.integration.registry._util import MODEL_SRC, check, run_script

pytestmark = pytest.mark.slow


@pytest.fixture
def models_path(tmp_path, monkeypatch):
    path = str(tmp_path / "models")
    monkeypatch.setenv("TANDEM_MODELS_PATH", path)
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    return path


def test_put_in_one_process_get_in_another_that_never_imported_the_class(tmp_path, models_path):
    putter = MODEL_SRC + '''
import json
from tandem import model

m = DigitsMLP({"hidden": 16, "seed": 7})
m.ensure_setup()
ref = model.put(m, name="digits", tags={"team": "vision"})
np.save("expected.npy", m.predict(digits(20)).numpy())
print(json.dumps({"ref": str(ref)}))
'''
    out = json.loads(check(run_script(putter, str(tmp_path), {"TANDEM_MODELS_PATH": models_path})))
    assert out["ref"] == "digits@1"
    getter = '''
import json, sys
import numpy as np
from sklearn.datasets import load_digits
from tandem import model

m = model.get("digits")
assert "DigitsMLP" not in sys.modules["__main__"].__dict__
X = load_digits().data.astype("float32")[:20] / 16.0
got = m.predict(X).numpy()
print(json.dumps({"cls": type(m).__name__, "config": m.config,
                  "close": bool(np.allclose(got, np.load("expected.npy"), atol=1e-6))}))
'''
    out = json.loads(check(run_script(getter, str(tmp_path), {"TANDEM_MODELS_PATH": models_path})))
    assert out == {"cls": "DigitsMLP", "config": {"hidden": 16, "seed": 7}, "close": True}
    (v,) = model.list("digits")
    assert v["version"] == 1 and v["tags"] == {"team": "vision"}
    assert v["environment"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert v["environment"]["torch"].startswith("2.")
    assert v["lineage"]["user"] and v["lineage"]["time"] > 0
    assert v["model_class"] == {"module": "__main__", "qualname": "DigitsMLP", "by_value": []}


def _ns(src: str) -> dict:
    ns: dict = {"__name__": "registry_test_models"}
    exec(compile(src, "registry_test_models", "exec"), ns)
    return ns


def test_versions_aliases_and_what_bad_references_say(models_path):
    DigitsMLP = _ns(MODEL_SRC)["DigitsMLP"]
    refs = [model.put(DigitsMLP({"seed": s}), name="mlp") for s in range(3)]
    assert [str(r) for r in refs] == ["mlp@1", "mlp@2", "mlp@3"]
    assert model.get("mlp").config["seed"] == 2  # latest
    assert model.get("mlp@1").config["seed"] == 0
    assert model.get(ModelRef("mlp", 2)).config["seed"] == 1
    assert model.get("mlp", version=1).config["seed"] == 0

    assert model.alias("mlp", "prod", 2) == ModelRef("mlp", 2)
    assert model.get("mlp@prod").config["seed"] == 1
    model.alias("mlp", "prod", 3)  # aliases move
    assert model.get("mlp@prod").config["seed"] == 2
    assert model.list() == [{"name": "mlp", "versions": 3, "latest": 3,
                             "updated": model.list()[0]["updated"], "aliases": {"prod": 3}}]

    with pytest.raises(RegistryError, match=r"mlp@3 is aliased \(mlp@prod\); move the alias"):
        model.delete("mlp", 3)
    model.delete("mlp", 1)
    assert [v["version"] for v in model.list("mlp")] == [2, 3]

    with pytest.raises(ModelNotFoundError, match=r"no model named 'nope'.*Registered models: mlp"):
        model.get("nope")
    with pytest.raises(ModelNotFoundError, match=r"'mlp' has no version 9\. Versions: 2, 3; "
                                                 r"aliases: prod->3"):
        model.get("mlp@9")
    with pytest.raises(ModelNotFoundError, match=r"'mlp' has no alias 'staging'"):
        model.get("mlp@staging")
    with pytest.raises(ConfigError, match="ends with '@'"):
        model.get("mlp@")
    with pytest.raises(ModelNotFoundError, match="has no version 1"):
        model.alias("mlp", "old", 1)
    # an explicit version that exists is refused; a free one is taken
    with pytest.raises(RegistryError, match="mlp@3 exists already"):
        model.put(DigitsMLP(), name="mlp", version=3)
    assert model.put(DigitsMLP(), name="mlp", version=10) == ModelRef("mlp", 10)
    assert model.put(DigitsMLP(), name="mlp") == ModelRef("mlp", 11)


def test_put_refuses_what_is_not_a_model_or_fails_its_check(models_path):
    ns = _ns(MODEL_SRC + '''
class BrokenSetup(DigitsMLP):
    def setup(self):
        raise RuntimeError("no weights file here")


class WrongExample(DigitsMLP):
    example_input = np.zeros((1, 3), dtype=np.float32)
''')
    with pytest.raises(RegistryError, match=r"model.put takes a Model subclass.*got 42"):
        model.put(42, name="x")
    with pytest.raises(RegistryError, match=r"got <function"):
        model.put(lambda x: x, name="x")
    with pytest.raises(RegistryError, match=r"BrokenSetup failed its check at put \(setup\(\) "
                                            r"raised RuntimeError: no weights file here\)"):
        model.put(ns["BrokenSetup"], name="broken")
    with pytest.raises(RegistryError) as info:
        model.put(ns["WrongExample"](), name="wrong")
    assert "predict(example_input)" in str(info.value)
    assert "Traceback" in str(info.value) and "mat1 and mat2" in str(info.value)
    assert model.list() == []  # nothing stored
    files = os.path.join(models_path, "files")
    assert not os.path.exists(files) or not any(os.scandir(files))


def test_a_module_the_puller_lacks_is_named_with_the_fix(tmp_path, models_path):
    helpers = tmp_path / "helpers_pkg_for_registry.py"
    helpers.write_text(MODEL_SRC)
    putter = '''
import sys
sys.path.insert(0, ".")
import helpers_pkg_for_registry as h
from tandem import model

print(model.put(h.DigitsMLP(), name="plain"))
print(model.put(h.DigitsMLP(), name="travels", by_value=[h]))
'''
    check(run_script(putter, str(tmp_path), {"TANDEM_MODELS_PATH": models_path}))
    other = tmp_path / "elsewhere"
    other.mkdir()
    getter = '''
from tandem import model

try:
    model.get("plain")
except ModuleNotFoundError as e:
    print("ERR", e)
m = model.get("travels")
print("OK", type(m).__name__, m.predict([[0.0] * 64]).shape)
'''
    out = check(run_script(getter, str(other), {"TANDEM_MODELS_PATH": models_path}))
    assert "ERR plain@1 needs the module 'helpers_pkg_for_registry'" in out
    assert "model.put(..., by_value=[helpers_pkg_for_registry])" in out
    assert "OK DigitsMLP torch.Size([1, 10])" in out


_PUT_MANY = """
import json, os, sys
from tandem.model.registry import ModelStore

db_url, storage = sys.argv[1], sys.argv[2]
store = ModelStore(db_url, storage)
src = os.path.join(storage, f"src-{os.getpid()}")
os.makedirs(src, exist_ok=True)
with open(os.path.join(src, "model.pkl"), "wb") as f:
    f.write(b"x" * 100)
print(json.dumps([store.add("same", src, {"config": {"pid": os.getpid()}}).version
                  for _ in range(3)]))
"""


def _concurrent_puts(db_url: str, storage: str, tmp_path: Any) -> None:
    script = tmp_path / "put_many.py"
    script.write_text(_PUT_MANY)
    procs = [subprocess.Popen([sys.executable, str(script), db_url, storage],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=90)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    versions = sorted(v for r in results for v in r)
    assert versions == list(range(1, 13)), results
    store = ModelStore(db_url, storage)
    try:
        records = store.versions("same")
        assert [r.version for r in records] == list(range(1, 13))
        assert len({r.location for r in records}) == 12  # each its own files
        assert all(os.path.exists(os.path.join(r.location, "model.pkl")) for r in records)
    finally:
        store.close()


def test_concurrent_puts_of_one_name_from_4_processes_get_distinct_versions_sqlite(tmp_path):
    _concurrent_puts("sqlite:///" + str(tmp_path / "registry.db"), str(tmp_path / "files"), tmp_path)


@pytest.mark.postgres
def test_concurrent_puts_of_one_name_from_4_processes_get_distinct_versions_postgres(
        tmp_path, postgres_database_url):
    _concurrent_puts(postgres_database_url, str(tmp_path / "files"), tmp_path)


def test_registry_on_s3_through_a_real_s3_server(tmp_path, monkeypatch):
    """Files in s3:// (moto's server on loopback), rows in SQLite; put and get in processes."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    srv = ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    srv.start()
    try:
        host, port = srv.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
               "AWS_DEFAULT_REGION": "us-east-1", "FSSPEC_S3_ENDPOINT_URL": endpoint,
               "TANDEM_MODELS_PATH": str(tmp_path / "models"),
               "TANDEM_MODELS_STORAGE": "s3://tandem-models/registry"}
        import boto3

        boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id="testing", aws_secret_access_key="testing"
                     ).create_bucket(Bucket="tandem-models")
        putter = MODEL_SRC + '''
from tandem import model
m = DigitsMLP({"seed": 3})
print(model.put(m, name="ons3"))
np.save("expected.npy", m.predict(digits(10)).numpy())
'''
        assert "ons3@1" in check(run_script(putter, str(tmp_path), env))
        getter = MODEL_SRC.split("class DigitsMLP")[0] + '''
from sklearn.datasets import load_digits
from tandem import model
rec = model.list("ons3")[0]
print(rec["location"])
m = model.get("ons3@1")
X = load_digits().data.astype("float32")[:10] / 16.0
print(bool(np.allclose(m.predict(X).numpy(), np.load("expected.npy"), atol=1e-6)))
'''
        out = check(run_script(getter, str(tmp_path), env)).split()
        assert out[0].startswith("s3://tandem-models/registry/ons3/")
        assert out[1] == "True"
        keys = [o["Key"] for o in boto3.client(
            "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
            aws_secret_access_key="testing").list_objects_v2(Bucket="tandem-models")["Contents"]]
        assert any(k.endswith("/model.pkl") for k in keys) and any(k.endswith("/model.pt")
                                                                   for k in keys)
    finally:
        srv.stop()
