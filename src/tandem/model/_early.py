"""The model layer's early start: its workers' and replicas' imports begin in the process
they fork from (the zygote) as soon as the program shows it will need them, while the
program goes on (``tandem.jobs.early.start_early`` decides whether at all)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from tandem.jobs.early import start_early

#: What a serving replica imports before its model (the model base classes, the
#: registry's loader and the replica's loop: no training code, SQL or HTTP front).
REPLICA_PRELOAD = ("tandem.model.serve._replica",)

#: What a ``TorchModel``'s serving replicas and training workers import before user code
#: (the replica's first: a serving replica forks as soon as they are in).
TORCH_MODEL_PRELOAD = ("torch", *REPLICA_PRELOAD, "torch.distributed", "torch.nn.parallel",
                       "tandem.train._internal.worker", "tandem.model._loop")


def start_torch_model_imports() -> bool:
    """Starts importing torch and tandem's replica, model and training-worker code where
    workers fork from, when a ``TorchModel`` subclass is defined (the program will train
    or serve it). Nothing without torch. (``import tandem.model`` alone starts nothing:
    a program that only reads the registry never pays for a zygote importing torch;
    ``model.serve("name@1")`` starts its own at once, see ``start_serving_imports``.)"""
    if importlib.util.find_spec("torch") is None:
        return False
    return start_early(TORCH_MODEL_PRELOAD)


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
