"""PyTorch on tandem: ``TorchTrainer`` (DDP over ``torch.distributed``) and helpers.

Importing this module does not import torch; the driver never needs it. Workers are
forked from a process that has imported torch once, so they start without paying for it.
"""

from __future__ import annotations

from tandem.train.backends.torch import TorchConfig
from tandem.train.torch.trainer import TorchTrainer
from tandem.train.torch.utils import (
    enable_reproducibility,
    get_device,
    prepare_data_loader,
    prepare_model,
)

__all__ = ["TorchConfig", "TorchTrainer", "enable_reproducibility", "get_device", "prepare_data_loader", "prepare_model"]
