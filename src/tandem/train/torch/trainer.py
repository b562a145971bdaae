"""``TorchTrainer``: a ``DataParallelTrainer`` whose gang shares a torch process group."""

from __future__ import annotations

from typing import Any

from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.torch import TorchConfig, import_torch_early


class TorchTrainer(DataParallelTrainer):
    """Like ``DataParallelTrainer``; each worker joins a ``torch.distributed`` process group
    (gloo on CPU, nccl on GPU, or ``torch_config=TorchConfig(backend=...)``) before the
    train function starts, and leaves it after."""

    _backend_config_cls = TorchConfig

    def __init__(self, train_loop_per_worker: Any, *, torch_config: TorchConfig | None = None,
                 **kwargs: Any) -> None:
        if torch_config is not None:
            kwargs.setdefault("backend_config", torch_config)
        super().__init__(train_loop_per_worker, **kwargs)
        import_torch_early()  # torch imports where the workers fork from, from now on
