"""The model layer's early start: its workers' and replicas' imports begin in the process
they fork from (the zygote) as soon as the program shows it will need them, while the
program goes on (``tandem.jobs.early.start_early`` decides whether at all)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from collections.abc import Sequence

from tandem.jobs.early import start_early

_TANDEM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: What a serving replica imports before its model (the model base classes, the
#: registry's loader and the replica's loop: no training code, SQL or HTTP front).
REPLICA_PRELOAD = ("tandem.model.serve._replica",)

#: What a ``TorchModel``'s serving replicas and training workers import before user code
#: (the replica's first: a serving replica forks as soon as they are in).
#: (``tandem.model._api`` brings the training loop and what a training worker's reports,
#: checkpoints and storage use: without it each worker imported them after its fork.)
TORCH_MODEL_PRELOAD = ("torch", *REPLICA_PRELOAD, "torch.distributed", "torch.nn.parallel",
                       "tandem.train._internal.worker", "tandem.model._api")


#: What ``import tandem.model`` by a program starts importing: torch and the replica's
#: code, never the training code (a replica forked from it then holds none of it).
IMPORT_PRELOAD = ("torch", *REPLICA_PRELOAD)


def start_torch_model_imports(at_import: bool = False) -> bool:
    """Starts importing torch and tandem's replica code (and, when a ``TorchModel``
    subclass is defined, the training code) where workers fork from. Nothing without torch.

    At ``import tandem.model`` by a program (``at_import``): a model served or trained from
    it is a torch one more often than not, and ``model.serve("name@1")`` names no class, so
    torch's import (2-3 s) starts then and overlaps whatever the program does before it
    serves (docs/benchmarks.md, "The first deployment, lighter": 0.45 s to the first answer
    with it, 2.2 s without, when the program does other work first)."""
    if importlib.util.find_spec("torch") is None:
        return False
    return start_early(IMPORT_PRELOAD if at_import else TORCH_MODEL_PRELOAD)


def imported_by_tandem() -> bool:
    """True when the import of ``tandem.model`` under way comes from tandem's own code (the
    CLI's ``tandem models``, a train server's registry), not from a program: they serve no
    model of their own, so nothing should start early for them."""
    frame: types.FrameType | None = sys._getframe(1)
    while frame is not None:
        name = frame.f_code.co_filename
        if name.startswith("<frozen importlib") or name.startswith(_TANDEM_DIR + "model" +
                                                                    os.sep):
            frame = frame.f_back  # the import machinery, the package's own __init__s
            continue
        return name.startswith(_TANDEM_DIR)
    return False


def start_serving_imports(frameworks: Sequence[str] = ()) -> bool:
    """Has the process replicas fork from start (at ``model.serve``'s entry, in parallel
    with the registry lookup, with only the replica's code) and then import the model's
    ``frameworks`` (torch, xgboost, ... once the lookup named them)."""
    return start_early((*REPLICA_PRELOAD, *frameworks))


#: What a model's class refers to -> the module its replicas need imported (the first
#: names are the tandem base classes, the others the frameworks themselves).
_FRAMEWORKS = {"TorchModel": "torch", "XGBoostModel": "xgboost", "LightGBMModel": "lightgbm",
               "torch": "torch", "xgboost": "xgboost", "lightgbm": "lightgbm",
               "sklearn": "sklearn"}


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def serve_imports(location: str) -> tuple[str, ...]:
    """The frameworks a saved model's replicas import (torch for a ``TorchModel``, ...),
    read from the names its ``model.pkl`` refers to, without unpickling it (the serving
    process never imports the framework). Empty for a remote location or an unreadable
    file: the replica then imports what it needs itself, as before."""
    import os
    import pickletools

    from tandem.model._files import PICKLE_FILE

    if "://" in location:
        return ()
    try:
        with open(os.path.join(location, PICKLE_FILE), "rb") as f:
            data = f.read()
        names = {a for op, a, _ in pickletools.genops(data) if isinstance(a, str)}
    except Exception:  # noqa: BLE001 - a hint only
        return ()
    found: list[str] = []
    for name in names:
        module = _FRAMEWORKS.get(name) or _FRAMEWORKS.get(name.split(".")[0])
        if module is not None and module not in found and _installed(module):
            found.append(module)
    return tuple(sorted(found))
