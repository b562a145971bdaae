"""``model.put``: typed dispatch, and a checkpoint's saved model adopted without loading it
(a local registry in ``tmp_path``; no processes)."""

from __future__ import annotations

import json
import os
import sys
import types
from typing import ClassVar

import pytest

from tandem import model
from tandem._core.errors import ConfigError
from tandem.model import Model
from tandem.model._files import META_FILE, OPTIMIZER_FILE, PICKLE_FILE, TRAINER_STATE_FILE
from tandem.model.registry import RegistryError
from tandem.train import Checkpoint, Result

FORBID = "TANDEM_TEST_FORBID_MODEL_LOAD"  # set: setup/load_weights raise. An environment
# variable, not a global: a class unpickled (by value) from model.pkl in this process runs
# with a copy of this module's globals.


def _forbidden(what: str) -> None:
    if os.environ.get(FORBID):
        raise AssertionError(f"{what} ran while {FORBID} was set")


class CountingModel(Model):
    """A model whose weights are one file; setup/load_weights raise under FORBID."""

    default_config: ClassVar[dict] = {"scale": 2.0}

    def setup(self):
        _forbidden("setup")
        self.w = None

    def forward(self, x):
        return [self.config["scale"] * v + self.w for v in x]

    def save_weights(self, directory):
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "weights.bin"), "wb") as f:
            f.write(json.dumps(getattr(self, "w", None) or 7.0).encode())

    def load_weights(self, directory):
        _forbidden("load_weights")
        self.ensure_setup()
        with open(os.path.join(directory, "weights.bin"), "rb") as f:
            self.w = json.loads(f.read())


class OtherModel(CountingModel):
    pass


@pytest.fixture
def models_path(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_MODELS_STORAGE", raising=False)
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    return str(tmp_path / "models")


def _training_checkpoint(path: str, cls: type = CountingModel) -> str:
    """A checkpoint as model.train writes it: a Model.save() folder plus training state."""
    cls({"scale": 3.0}).save(path)  # save_weights without setup: no load, no setup
    with open(os.path.join(path, OPTIMIZER_FILE), "wb") as f:
        f.write(b"optimizer state")
    with open(os.path.join(path, TRAINER_STATE_FILE), "w") as f:
        json.dump({"epoch": 2}, f)
    return path


def _stored_files(ref) -> dict[str, bytes]:
    record = model.registry.resolve(ref)
    out = {}
    for name in os.listdir(record.location):
        with open(os.path.join(record.location, name), "rb") as f:
            out[name] = f.read()
    return out


def _files(path: str) -> dict[str, bytes]:
    out = {}
    for name in os.listdir(path):
        with open(os.path.join(path, name), "rb") as f:
            out[name] = f.read()
    return out


def test_a_result_is_adopted_byte_for_byte_without_loading_the_model(tmp_path, models_path,
                                                                     monkeypatch):
    ckpt = _training_checkpoint(str(tmp_path / "checkpoint_000001"))
    result = Result(metrics={"epoch": 2, "loss": 0.5, "trial_id": "t1", "obj": object()},
                    checkpoint=Checkpoint(ckpt), path=str(tmp_path))
    monkeypatch.setenv(FORBID, "1")  # put neither sets the model up nor loads its weights
    ref = model.put(result)
    assert ref == model.ModelRef("CountingModel", 1)
    stored = _stored_files(ref)
    expected = {k: v for k, v in _files(ckpt).items()
                if k not in (OPTIMIZER_FILE, TRAINER_STATE_FILE)}
    assert stored == expected  # the saved model, byte for byte; no training state
    assert set(stored) == {"weights.bin", PICKLE_FILE, META_FILE}
    (v,) = model.list("CountingModel")
    assert v["config"] == {"scale": 3.0}
    assert v["metrics"] == {"epoch": 2, "loss": 0.5, "trial_id": "t1"}
    assert v["lineage"]["checkpoint"] == ckpt and v["lineage"]["trial_id"] == "t1"
    assert v["model_class"]["qualname"] == "CountingModel"
    # checkpoint=PATH does the same; the class given must be the one it holds
    assert model.put(CountingModel, checkpoint=ckpt, name="again") == model.ModelRef("again", 1)
    assert _stored_files("again@1") == expected
    with pytest.raises(RegistryError, match=r"holds a CountingModel, not a OtherModel"):
        model.put(OtherModel, checkpoint=ckpt, name="other")
    monkeypatch.delenv(FORBID)
    assert model.get(ref).predict([1.0]) == [10.0]  # and it loads where it is used


def test_by_value_repickles_only_the_class_file(tmp_path, models_path, monkeypatch):
    monkeypatch.setenv(FORBID, "1")
    helper = types.ModuleType("tandem_test_put_helper")
    sys.modules[helper.__name__] = helper
    try:
        ckpt = _training_checkpoint(str(tmp_path / "ckpt"))
        model.put(checkpoint=ckpt, name="bv", by_value=[helper])
        stored, original = _stored_files("bv@1"), _files(ckpt)
        assert stored["weights.bin"] == original["weights.bin"]
        assert stored[META_FILE] == original[META_FILE]
        assert model.list("bv")[0]["model_class"]["by_value"] == ["tandem_test_put_helper"]
    finally:
        del sys.modules[helper.__name__]


def test_put_refuses_what_it_cannot_store_before_storing(tmp_path, models_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "model.pt").write_bytes(b"x")
    with pytest.raises(RegistryError, match=r"is not a saved model \(it has no model.pkl or "
                                            r"tandem_model.json; it holds \['model.pt'\]\)"):
        model.put(checkpoint=str(plain))
    with pytest.raises(RegistryError, match=r"the run at .* failed \(ValueError: boom\)"):
        model.put(Result(metrics=None, checkpoint=None, path="/r", error=ValueError("boom")))
    with pytest.raises(RegistryError, match=r"the run at /r has no checkpoint"):
        model.put(Result(metrics={}, checkpoint=None, path="/r"))
    with pytest.raises(RegistryError, match=r"model.put takes a Model subclass.*got <class 'int'>"):
        model.put(int)
    with pytest.raises(ConfigError, match=r"with a checkpoint, x may only be the Model class"):
        model.put(CountingModel(), checkpoint=str(plain))
    ckpt = _training_checkpoint(str(tmp_path / "ckpt"))
    with pytest.raises(ConfigError, match=r"sets the config of a class registered untrained"):
        model.put(checkpoint=ckpt, config={"scale": 1.0})
    assert model.list() == []
    # a class is built with put's config, checked (setup runs) and saved
    ref = model.put(CountingModel, config={"scale": 5.0})
    assert model.list("CountingModel")[0]["config"] == {"scale": 5.0}
    assert ref.version == 1
