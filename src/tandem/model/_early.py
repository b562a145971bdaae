"""The model layer's early start: its workers' and replicas' imports begin in the process
they fork from (the zygote) as soon as the program shows it will need them, while the
program goes on (``tandem.jobs.early.start_early`` decides whether at all)."""

from __future__ import annotations

import importlib.util

from tandem.jobs.early import start_early

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
