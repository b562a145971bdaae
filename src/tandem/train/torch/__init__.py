"""PyTorch on tandem: ``TorchTrainer`` (DDP over ``torch.distributed``) and helpers.

Importing this module does not import torch; the driver never needs it. Workers are
forked from a process that has imported torch once, so they start without paying for it;
importing this module starts that import there (``import_torch_early``; off with
``TANDEM_EARLY_IMPORT=0``), so it runs while the program goes on.
"""

from __future__ import annotations

from tandem.train.backends.torch import TorchConfig, import_torch_early
from tandem.train.torch.checkpoint import TorchCheckpoint
from tandem.train.torch.trainer import TorchTrainer
from tandem.train.torch.utils import (
    accelerate,
    backward,
    enable_reproducibility,
    get_device,
    get_devices,
    prepare_data_loader,
    prepare_model,
    prepare_optimizer,
)

import_torch_early()

__all__ = [
    "TorchCheckpoint",
    "TorchConfig",
    "TorchTrainer",
    "accelerate",
    "backward",
    "enable_reproducibility",
    "get_device",
    "get_devices",
    "prepare_data_loader",
    "prepare_model",
    "prepare_optimizer",
]
