"""The TensorFlow / JAX / Horovod backends as plugins: imported only when used, refused with
the extra to install when their library is missing, bad settings refused up front."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tandem._core.errors import ConfigError
from tandem.train.backends.tensorflow import tf_config


def test_import_tandem_and_the_torch_paths_import_no_tensorflow_or_jax():
    code = (
        "import sys, tandem, tandem.model, tandem.train, tandem.train.torch, tandem.tune\n"
        "import tandem.train.tensorflow, tandem.train.jax, tandem.train.v2.jax\n"
        "from tandem.train import Trainer\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('tensorflow', 'jax', 'jaxlib', 'keras', 'tf_keras', 'horovod'))\n"
        "print(bad)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    assert out.strip() == "[]"


@pytest.fixture
def missing(monkeypatch):
    """Makes the named top-level modules look uninstalled (find_spec -> None)."""
    names: set[str] = set()
    real = importlib.util.find_spec

    def fake(name, *a, **k):
        return None if name.split(".")[0] in names else real(name, *a, **k)

    monkeypatch.setattr(importlib.util, "find_spec", fake)
    return names


def test_a_backend_not_installed_names_the_extra(missing):
    from tandem import model
    from tandem.train import Trainer
    from tandem.train.jax import JaxTrainer
    from tandem.train.tensorflow import TensorflowTrainer

    missing.update({"tensorflow", "jax"})
    with pytest.raises(ModuleNotFoundError, match=r"tandem-ml\[tensorflow\]"):
        TensorflowTrainer(lambda: None)
    with pytest.raises(ModuleNotFoundError, match=r"tandem-ml\[tensorflow\]"):
        Trainer("tensorflow", num_workers=1)
    with pytest.raises(ModuleNotFoundError, match=r"tandem-ml\[jax\]"):
        JaxTrainer(lambda: None)

    class Net(model.TensorflowModel):
        def setup(self):
            pass

    with pytest.raises(ModuleNotFoundError, match=r"'tensorflow' extra"):
        model.train(Net, dataset={"train": ([[0.0]], [0.0])})


def test_bad_backend_settings_are_refused():
    from tandem.train.jax import JaxConfig, JaxTrainer
    from tandem.train.tensorflow import TensorflowConfig, TensorflowTrainer

    with pytest.raises(ConfigError, match="no TPUs"):
        JaxConfig(use_tpu=True)
    with pytest.raises(ConfigError, match="validation_config"):
        JaxTrainer(lambda: None, validation_config=object())
    with pytest.raises(ConfigError, match="takes a JaxConfig"):
        JaxTrainer(lambda: None, jax_config=TensorflowConfig())
    with pytest.raises(ConfigError, match="takes a TensorflowConfig"):
        TensorflowTrainer(lambda: None, tensorflow_config=JaxConfig())
    with pytest.raises(ConfigError, match="legacy_keras"):
        TensorflowConfig(legacy_keras="yes")  # type: ignore[arg-type]


def test_tf_config_is_rays_layout():
    assert json.loads(tf_config(["a:1", "b:2"], 1)) == {
        "cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}


def test_model_classes_without_their_hooks_are_refused():
    from tandem import model
    from tandem.model import ModelDefinitionError

    class NoApply(model.JaxModel):
        def init_params(self, rng):
            return {}

    class NoSetup(model.TensorflowModel):
        pass

    with pytest.raises(ModelDefinitionError, match=r"apply\(\)"):
        model.train(NoApply, dataset={"train": ([[0.0]], [0.0])})
    with pytest.raises(ModelDefinitionError, match=r"setup\(\)"):
        model.train(NoSetup, dataset={"train": ([[0.0]], [0.0])})


def test_horovod_names_raise_saying_why_and_what_to_use():
    from tandem.train import Trainer
    from tandem.train.horovod import HorovodConfig, HorovodTrainer, HorovodUnavailableError

    for build in (lambda: HorovodTrainer(lambda: None), HorovodConfig,
                  lambda: Trainer("horovod", num_workers=2)):
        with pytest.raises(HorovodUnavailableError, match=r"C\+\+17.*TorchTrainer"):
            build()


def test_a_worker_refuses_tensorflow_preloaded_for_the_other_keras(monkeypatch):
    """TensorFlow binds its Keras when imported (once per session, where workers fork from):
    a run wanting the other Keras is refused with what to do, not run with the two mixed.
    (A stand-in module for the preloaded TensorFlow: only its __path__ is read.)"""
    import types

    from tandem.train.backends.tensorflow import _check_inherited_keras

    fake_tf = types.ModuleType("tensorflow")
    fake_tf.__path__ = ["/site-packages/tf_keras/api/_v2", "/site-packages/tensorflow"]
    monkeypatch.setitem(sys.modules, "tensorflow", fake_tf)
    monkeypatch.setenv("TF_USE_LEGACY_KERAS", "1")
    _check_inherited_keras()  # Keras 2 imported, Keras 2 wanted
    monkeypatch.delenv("TF_USE_LEGACY_KERAS")
    with pytest.raises(RuntimeError, match=r"imported for Keras 2 .*wants Keras 3.*tandem.init"):
        _check_inherited_keras()
    fake_tf.__path__ = ["/site-packages/keras/api/_v2", "/site-packages/tensorflow"]
    _check_inherited_keras()  # Keras 3 imported, Keras 3 wanted
