"""Helpers used inside the train function: device, DDP wrapping, distributed data loading."""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING, Any

from tandem.train.session import get_context

if TYPE_CHECKING:
    import torch


def get_device() -> torch.device:
    """This worker's ``torch.device``: its GPU when it has one, else the CPU."""
    import torch

    if os.environ.get("CUDA_VISIBLE_DEVICES") and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def get_devices() -> list[torch.device]:
    """Every ``torch.device`` this worker was given (Ray's ``get_devices``): one CUDA device
    per GPU of its bundle (``resources_per_worker={"GPU": 2}`` gives two), else the CPU."""
    import torch

    visible = [v for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip() and v != "NoDevFiles"]
    if visible and torch.cuda.is_available():
        return [torch.device(f"cuda:{i}") for i in range(len(visible))]
    return [torch.device("cpu")]


_TORCH_AMP_DEPRECATION_MESSAGE = (
    "The `accelerate`, `backward`, and `prepare_optimizer` utility methods in the "
    "`ray.train.torch` module are deprecated and will be removed in a future release. "
    "Please use the native PyTorch mixed precision API directly, or a library such as "
    "Lightning or HuggingFace Transformers/Accelerate. See this issue for more context: "
    "https://github.com/ray-project/ray/issues/49454"
)


def accelerate(amp: bool = False) -> None:
    """Deprecated in Ray: raises ``DeprecationWarning`` (Ray's message); use
    ``torch.autocast`` / ``torch.amp.GradScaler`` in the train function."""
    raise DeprecationWarning(_TORCH_AMP_DEPRECATION_MESSAGE)


def prepare_optimizer(optimizer: object) -> Any:
    """Deprecated in Ray: raises ``DeprecationWarning``; use the optimizer as is."""
    raise DeprecationWarning(_TORCH_AMP_DEPRECATION_MESSAGE)


def backward(tensor: object) -> None:
    """Deprecated in Ray: raises ``DeprecationWarning``; call ``tensor.backward()``."""
    raise DeprecationWarning(_TORCH_AMP_DEPRECATION_MESSAGE)


def prepare_model(
    model: torch.nn.Module,
    move_to_device: bool = True,
    parallel_strategy: str | None = "ddp",
    parallel_strategy_kwargs: dict[str, Any] | None = None,
) -> torch.nn.Module:
    """Moves ``model`` to this worker's device and wraps it in DistributedDataParallel
    (when there is more than one worker), so gradients are all-reduced on ``backward()``."""
    import torch

    if parallel_strategy not in ("ddp", None):
        raise ValueError(
            f"prepare_model(parallel_strategy={parallel_strategy!r}): use 'ddp' or None."
        )
    device = get_device()
    if move_to_device:
        model = model.to(device)
    if parallel_strategy == "ddp" and get_context().get_world_size() > 1:
        from torch.nn.parallel import DistributedDataParallel

        kwargs = dict(parallel_strategy_kwargs or {})
        if device.type == "cuda":
            kwargs.setdefault("device_ids", [device.index])
        model = DistributedDataParallel(model, **kwargs)
    del torch
    return model


class _DeviceLoader:
    """Moves each batch to ``device``; with ``auto_transfer`` on a CUDA device, the next
    batch is copied on a side CUDA stream while the current one is used (Ray's
    ``auto_transfer``)."""

    def __init__(self, loader: Any, device: torch.device, auto_transfer: bool = False) -> None:
        self._loader = loader
        self._device = device
        self._auto_transfer = auto_transfer and getattr(device, "type", "") == "cuda"

    def __len__(self) -> int:
        return len(self._loader)

    def __iter__(self) -> Any:
        if not self._auto_transfer:
            for batch in self._loader:
                yield _to_device(batch, self._device)
            return
        import torch

        stream = torch.cuda.Stream(device=self._device)
        batches = iter(self._loader)

        def prefetch() -> tuple[object, bool]:
            try:
                batch = next(batches)
            except StopIteration:
                return None, False
            with torch.cuda.stream(stream):
                return _to_device(batch, self._device), True

        nxt, more = prefetch()
        while more:
            current = torch.cuda.current_stream(self._device)
            current.wait_stream(stream)
            _record_stream(nxt, current)
            batch = nxt
            nxt, more = prefetch()
            yield batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._loader, name)


def _record_stream(batch: object, stream: object) -> None:
    """Tells the CUDA caching allocator that ``batch`` (copied on another stream) is used on
    ``stream``, so its memory is not reused while that stream still reads it."""
    if hasattr(batch, "record_stream"):
        batch.record_stream(stream)
    elif isinstance(batch, (list, tuple)):
        for b in batch:
            _record_stream(b, stream)
    elif isinstance(batch, dict):
        for b in batch.values():
            _record_stream(b, stream)


def _to_device(batch: object, device: object) -> object:
    if hasattr(batch, "to"):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, (list, tuple)):
        return type(batch)(_to_device(b, device) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def prepare_data_loader(data_loader: Any, add_dist_sampler: bool = True,
                        move_to_device: bool = True, auto_transfer: bool = True) -> Any:
    """Gives each worker a distinct part of the data (a ``DistributedSampler``) and moves
    batches to the worker's device. Call ``loader.sampler.set_epoch(epoch)`` to reshuffle.
    ``auto_transfer`` (on a GPU, with ``move_to_device``): the next batch is copied to the
    GPU on a side CUDA stream while training runs on the current one, as Ray's."""
    from torch.utils.data import DataLoader, DistributedSampler, RandomSampler

    ctx = get_context()
    if add_dist_sampler and ctx.get_world_size() > 1 and not isinstance(
        data_loader.sampler, DistributedSampler
    ):
        shuffle = isinstance(data_loader.sampler, RandomSampler)
        sampler: DistributedSampler = DistributedSampler(
            data_loader.dataset, num_replicas=ctx.get_world_size(), rank=ctx.get_world_rank(),
            shuffle=shuffle,
        )
        data_loader = DataLoader(
            data_loader.dataset,
            batch_size=data_loader.batch_size,
            sampler=sampler,
            num_workers=data_loader.num_workers,
            collate_fn=data_loader.collate_fn,
            pin_memory=data_loader.pin_memory,
            drop_last=data_loader.drop_last,
            timeout=data_loader.timeout,
            worker_init_fn=_seeded_worker_init(data_loader.worker_init_fn),
            generator=_seeded_generator(data_loader.generator),
        )
    device = get_device()
    if move_to_device and device.type != "cpu":
        return _DeviceLoader(data_loader, device, auto_transfer)
    return data_loader


_seed: int | None = None


def enable_reproducibility(seed: int = 0) -> None:
    """As ``ray.train.torch.enable_reproducibility``: seeds torch, ``random`` and NumPy with
    ``seed``, makes torch use deterministic algorithms (cuDNN benchmarking off, cuBLAS
    workspace set), and makes ``prepare_data_loader`` seed its loader's workers and
    generator. Call it at the top of the train function, on every worker. Results can
    still differ across machines and library versions (see PyTorch's notes on randomness).
    """
    global _seed
    import random

    import numpy as np
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"enable_reproducibility(seed={seed!r}): give an integer seed.")
    _seed = seed
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"


def _seeded_worker_init(fn: object) -> Any:
    if _seed is None:
        return fn
    return functools.partial(_seed_data_worker, fn)


def _seed_data_worker(fn: Any, worker_id: int) -> None:
    import random

    import numpy as np
    import torch

    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)
    if fn is not None:
        fn(worker_id)


def _seeded_generator(generator: object) -> object:
    if _seed is None:
        return generator
    import torch

    g = torch.Generator()
    g.manual_seed(_seed)
    return g
