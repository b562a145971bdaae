"""``import tandem.model`` is light (issue 25: the first deployment's critical path): no SQL,
torch, training or tuning code here; the zygote it starts imports torch and the replica's
code only (no training code); every public name still resolves, to what type checkers
see, and ``tandem.model.serve`` stays the function."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))), "src")

PROGRAM = """
import json, sys
heavy = ("sqlalchemy", "alembic", "torch", "numpy", "tandem.train", "tandem.tune",
         "tandem.model._loop", "tandem.model._data", "uvicorn", "fastapi")
import tandem.model as m
out = {"loaded": [h for h in heavy if h in sys.modules]}
import tandem.model.serve._replica  # what a replica imports: the subpackage, not the function
out["replica loaded"] = [h for h in heavy if h in sys.modules]
from tandem.cluster import local
out["zygote"] = local.early_zygote_modules()
local.discard_early_zygote()
out["serve is the function"] = callable(m.serve) and m.serve.__module__ == "tandem.model.serve._api"
from tandem.model import TorchModel, train, ModelResult, DataError, NonFiniteLossError, serve
from tandem.model.serve import ServeError, ServeRunner
out["names"] = {n: getattr(getattr(m, n), "__module__", None) for n in m.__all__}
out["dir"] = sorted(set(m.__all__) - set(dir(m)))
out["serve still the function"] = m.serve is serve and callable(serve)
print(json.dumps(out))
"""


def test_import_tandem_model_is_light_and_every_name_resolves():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]),
           "TANDEM_EARLY_IMPORT": "1", "TANDEM_ADDRESS": "local"}
    proc = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["loaded"] == [], out
    # torch and the replica's code start importing where replicas fork from; nothing of
    # the training code (it joins when a TorchModel subclass is defined)
    assert out["zygote"] == ["torch", "tandem.model.serve._replica"], out
    # the replica's module brings the model classes and the loader: none of the heavy ones
    assert out["replica loaded"] == [], out
    assert out["serve is the function"] and out["serve still the function"]
    assert out["dir"] == []
    names = out["names"]
    assert names["TorchModel"] == "tandem.model._model"
    assert names["train"] == names["tune"] == "tandem.model._api"
    assert names["ServeHandle"] == "tandem.model.serve._api"
    assert names["ModelRef"] == "tandem.model.registry._ref"
    # type checkers see every lazy name: an ``if TYPE_CHECKING:`` import of its module
    with open(os.path.join(SRC, "tandem", "model", "__init__.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    seen: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            seen.update({a.asname or a.name: str(node.module) for a in node.names})
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom)
                seen.update({a.asname or a.name: str(stmt.module) for a in stmt.names})
    assert set(names) <= set(seen), set(names) - set(seen)
    import importlib

    import tandem.model

    for name in names:
        assert getattr(tandem.model, name) is getattr(importlib.import_module(seen[name]),
                                                      name), name


def test_serve_refuses_a_wrong_model_before_anything_starts(monkeypatch):
    """A bad ``model`` argument is refused before a zygote (or anything) starts."""
    import pytest

    from tandem import model
    from tandem._core.errors import ConfigError
    from tandem.model import _early

    started: list[tuple[str, ...]] = []
    monkeypatch.setattr(_early, "start_early", lambda preload: started.append(tuple(preload)))
    with pytest.raises(ConfigError, match=r"registry reference .* or a Model instance; got 3"):
        model.serve(3)
    assert started == []
