"""The model layer's early start: its workers' and replicas' imports begin in the process
they fork from (the zygote) as soon as the program shows it will need them, while the
program goes on (``tandem.jobs.early.start_early`` decides whether at all)."""

from __future__ import annotations

import importlib.util
import os
import sys
import types

from tandem.jobs.early import start_early

_TANDEM_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

#: what a ``TorchModel``'s training workers and serving replicas import before user code
TORCH_MODEL_PRELOAD = ("torch", "torch.distributed", "torch.nn.parallel",
                       "tandem.train._internal.worker", "tandem.model",
                       "tandem.model.serve._replica")


def start_torch_model_imports() -> bool:
    """Starts importing torch and tandem's model, training-worker and replica code where
    workers fork from: at ``import tandem.model`` (a model served or trained from this
    program is a torch one more often than not, and ``model.serve("name@1")`` names no
    class) and when a ``TorchModel`` subclass is defined. Nothing without torch."""
    if importlib.util.find_spec("torch") is None:
        return False
    return start_early(TORCH_MODEL_PRELOAD)


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
