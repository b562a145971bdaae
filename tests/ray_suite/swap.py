"""The import swap: ``target("tune.search.sample")`` is ``ray.tune.search.sample`` or
``tandem.tune.search.sample``.

The peer suite runs on tandem by default; ``RAY_SUITE_TARGET=ray`` runs the very same tests
on Ray 2.60 (how the "Ray passes" column of docs/migration.md is counted).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

TARGET = os.environ.get("RAY_SUITE_TARGET", "tandem")
if TARGET not in ("tandem", "ray"):
    raise ValueError(f"RAY_SUITE_TARGET={TARGET!r}: use 'tandem' (default) or 'ray'.")
ON_RAY = TARGET == "ray"


def target(path: str) -> ModuleType:
    """The module ``<target>.<path>``."""
    return importlib.import_module(f"{TARGET}.{path}")


tune = target("tune")
train = target("train")
