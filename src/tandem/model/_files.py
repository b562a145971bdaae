"""What a saved model is made of: its file names, and the files that identify it (the class,
by value where another process could not import it, and its config).

Below ``_model`` (the Model classes) and ``_loop`` (the torch training loop), which both
write these files.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from tandem._core.errors import TandemError

WEIGHTS_FILE = "model.pt"
PICKLE_FILE = "model.pkl"
META_FILE = "tandem_model.json"
OPTIMIZER_FILE = "optimizer.pt"
TRAINER_STATE_FILE = "trainer_state.json"
OPTIMIZER_NPZ = "optimizer.npz"  # a TensorflowModel's optimizer slots
OPT_STATE_NPZ = "opt_state.npz"  # a JaxModel's optimizer state
TRAINING_STATE_FILES = frozenset({OPTIMIZER_FILE, TRAINER_STATE_FILE, OPTIMIZER_NPZ,
                                  OPT_STATE_NPZ})
"""What a training checkpoint holds beside the saved model (to resume the run); the
registry adopts a checkpoint's other files, the saved model, as they are."""


class ModelDefinitionError(TandemError, TypeError):
    """A model class lacks something the framework needs (``setup``, ``forward``,
    ``training_step``) or returns something it cannot use. The message names the class, the
    method and what to write."""



def _package_version(name: str) -> str | None:
    import importlib.metadata  # (on use: a replica and ``import tandem.model`` skip it)

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _installed(module_name: str) -> bool:
    """Whether ``module_name`` would import the same way in another process: it belongs to
    an installed distribution (site-packages) or to tandem itself. A class from ``__main__``,
    a test file or a script directory is not, and is pickled by value."""
    if module_name == "__main__" or module_name.startswith("__"):
        return False
    top = module_name.split(".")[0]
    if top == "tandem":
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None) or ""
    return any(part in path for part in ("site-packages", "dist-packages"))


@contextlib.contextmanager
def pickled_by_value(*objs: object) -> Iterator[None]:
    """Within: cloudpickle pickles the modules that define ``objs`` by value when another
    process (a worker, the train server, a registry reader) could not import them: a
    script, a test file, a notebook. Installed packages and tandem stay by reference."""
    import cloudpickle

    registry: set[str] = getattr(getattr(cloudpickle, "cloudpickle", None), "_PICKLE_BY_VALUE_MODULES",
                       set())
    added: list[Any] = []
    for obj in objs:
        name = getattr(obj, "__module__", None)
        if not name or name == "__main__" or _installed(name) or name in registry:
            continue
        module = sys.modules.get(name)
        if module is None:
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:
            continue
        added.append(module)
    try:
        yield
    finally:
        for module in added:
            cloudpickle.unregister_pickle_by_value(module)


class Configured(Protocol):
    """A model as far as its identity goes: its class and its config."""

    config: dict[str, Any]


def identity_files(model: Configured) -> dict[str, bytes]:
    """``model.pkl`` (the class, by value unless it is importable from an installed package,
    and the config) and ``tandem_model.json``, as file name -> bytes."""
    import cloudpickle

    cls = type(model)
    with pickled_by_value(cls):
        payload = cloudpickle.dumps({"cls": cls, "config": model.config})
    meta = {
        "class": cls.__qualname__,
        "module": cls.__module__,
        "config": _jsonable(model.config),
        "python_version": ".".join(map(str, sys.version_info[:3])),
        "torch_version": _package_version("torch"),
        "tandem_version": _tandem_version(),
    }
    return {PICKLE_FILE: payload, META_FILE: json.dumps(meta, indent=2).encode()}


def _tandem_version() -> str:
    import tandem

    return str(getattr(tandem, "__version__", "unknown"))


def _jsonable(value: object) -> object:
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        if isinstance(value, Mapping):
            return {str(k): _jsonable(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_jsonable(v) for v in value]
        return repr(value)
