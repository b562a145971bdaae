"""A small registrable model defined in a module of its own (the serving replicas import it
from the same folder, which the server's PYTHONPATH does not have: it travels by value)."""

from __future__ import annotations

import os

from tests.integration.registry._util import MODEL_SRC


def write_model_module(tmp_path: object) -> str:
    folder = os.path.join(str(tmp_path), "models_src")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "registry_model.py"), "w") as f:
        f.write(MODEL_SRC)
    return folder
