"""The torch training loop ``model.train`` runs on each worker (framework code).

Per epoch: reshuffle this worker's shard, batch it, ``training_step`` (in autocast when
``precision`` asks), ``backward`` (DDP all-reduces the gradients), optimizer step;
``validation_step`` over this worker's validation rows; average every metric across
ranks; report one row (``epoch``, ``loss``, ``val_*``, ``epoch_time_s``, ``samples_per_s``)
and, every ``checkpoint_every`` epochs and after the last, a checkpoint: a ``Model.save()``
directory plus ``optimizer.pt`` and ``trainer_state.json``. After a worker failure the gang
restarts here and resumes from the latest checkpoint. Every step and hook may be
``async def``: the loop runs in the worker's event loop and awaits them.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Awaitable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, SupportsFloat, SupportsIndex

import cloudpickle

from tandem._core.errors import TandemError
from tandem.model._data import WorkerData, check_splits, normalize, rank_datasets
from tandem.model._files import (
    OPTIMIZER_FILE,
    TRAINER_STATE_FILE,
    ModelDefinitionError,
    _jsonable,
    identity_files,
)
from tandem.model._settings import TrainSettings

if TYPE_CHECKING:
    import torch
    from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

    from tandem.train.api.checkpoint import Checkpoint

_Hook = Awaitable[None] | None
"""What a hook returns: nothing, or (an ``async def`` hook) an awaitable of nothing."""


class TorchModel(Protocol):
    """What this loop uses of the model it trains: ``tandem.model.TorchModel``'s hooks.

    A Protocol, so that the model class (whose ``worker_loop`` is ``run_worker``) and its
    loop do not import each other.
    """

    config: dict[str, Any]
    device: torch.device
    is_setup: bool

    def setup(self) -> _Hook: ...

    def modules(self) -> dict[str, torch.nn.Module]: ...

    def parameters(self) -> list[torch.nn.Parameter]: ...

    def training_step(self, batch: Any, batch_idx: int) -> object: ...

    def validation_step(self, batch: Any, batch_idx: int) -> object: ...

    def configure_optimizers(self) -> object: ...

    def on_fit_start(self) -> _Hook: ...

    def on_epoch_start(self, epoch: int) -> _Hook: ...

    def on_epoch_end(self, epoch: int, metrics: dict[str, float | None]) -> _Hook: ...

    def on_batch_start(self, batch: Any, batch_idx: int) -> _Hook: ...

    def on_batch_end(self, batch: Any, batch_idx: int, output: object) -> _Hook: ...

    def on_fit_end(self) -> _Hook: ...

    def save_weights(self, directory: str) -> None: ...

    def load_weights(self, directory: str) -> None: ...

    def load_weights_state(self, state: Any) -> None: ...


class NonFiniteLossError(TandemError, FloatingPointError):
    """``training_step`` returned a NaN or infinite loss (``on_nonfinite_loss="raise"``)."""


@dataclass
class WorkerPayload:
    """What every worker of a ``model.train`` job gets (cloudpickled once on the driver;
    the model config is the job's ``train_loop_config``, so tuning can vary it)."""

    model_cls: type
    settings: TrainSettings
    seed: int
    data_source: Any = None  # a class or object with setup(); None: the splits below
    splits: dict[str, Any] = field(default_factory=dict)  # torch Datasets, by split
    datasets: tuple[str, ...] = ()
    """The splits handed to the trainer as its ``datasets`` (``_data.TrainerData``)."""
    datasets_to_split: tuple[str, ...] = ()
    """Those of them its ``DataConfig`` splits by rank (the rest reach each worker whole)."""
    init_weights: Any = None
    """A set-up instance's ``weights_state()`` to start from (None: ``setup()``'s)."""


async def _maybe(value: object) -> object:
    if inspect.isawaitable(value):
        return await value
    return value


def _to_device(batch: object, device: torch.device) -> object:
    if hasattr(batch, "to") and not isinstance(batch, type):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, tuple):
        return tuple(_to_device(b, device) for b in batch)
    if isinstance(batch, list):
        return [_to_device(b, device) for b in batch]
    if isinstance(batch, dict):
        return {k: _to_device(v, device) for k, v in batch.items()}
    return batch


def _batch_len(batch: object) -> int:
    shape = getattr(batch, "shape", None)
    if shape is not None:
        return int(shape[0]) if len(shape) else 1
    if isinstance(batch, (tuple, list)) and batch:
        return _batch_len(batch[0])
    if isinstance(batch, dict) and batch:
        return _batch_len(next(iter(batch.values())))
    return 1


def _number(value: object) -> float:
    if hasattr(value, "detach"):
        tensor = value.detach()
        if tensor.numel() != 1:
            tensor = tensor.float().mean()
        return float(tensor.item())
    if not isinstance(value, (SupportsFloat, SupportsIndex, str)):
        raise TypeError(f"a metric must be a number, got {type(value).__name__} {value!r:.60}")
    return float(value)


def split_output(model: TorchModel, out: object, epoch: int, batch_idx: int
                 ) -> tuple[torch.Tensor, dict[str, object]]:
    """``(loss tensor, other metrics)`` from what ``training_step`` returned."""
    import torch

    name = type(model).__name__
    extra: dict[str, object] = {}
    if isinstance(out, dict):
        if "loss" not in out:
            raise ModelDefinitionError(
                f"{name}.training_step returned a dict without 'loss' (keys: {sorted(out)}) "
                f"at epoch {epoch}, batch {batch_idx}. Return the loss tensor, or a dict "
                f"with 'loss' and other metrics."
            )
        loss = out["loss"]
        extra = {k: v for k, v in out.items() if k != "loss"}
    else:
        loss = out
    if not isinstance(loss, torch.Tensor):
        raise ModelDefinitionError(
            f"{name}.training_step returned {type(loss).__name__} {loss!r:.60} at epoch "
            f"{epoch}, batch {batch_idx}; it must return the loss as a torch tensor (or a dict "
            f"with 'loss'). Did you forget to return the loss, or call .item() on it?"
        )
    if loss.numel() != 1:
        raise ModelDefinitionError(
            f"{name}.training_step returned a loss of shape {tuple(loss.shape)} at epoch "
            f"{epoch}, batch {batch_idx}; it must be a single number (reduce it, e.g. .mean())."
        )
    if not loss.requires_grad:
        raise ModelDefinitionError(
            f"{name}.training_step returned a loss that does not require grad at epoch "
            f"{epoch}, batch {batch_idx}: it is not connected to any trainable parameter "
            f"(computed under torch.no_grad(), or from detached tensors?)."
        )
    return loss, extra


def _optimizers(model: TorchModel, value: object
                ) -> tuple[torch.optim.Optimizer, LRScheduler | ReduceLROnPlateau | None]:
    import torch

    opt, sched = value, None
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise ModelDefinitionError(
                f"{type(model).__name__}.configure_optimizers returned {len(value)} items; "
                f"return an optimizer or (optimizer, lr_scheduler)."
            )
        opt, sched = value
    if isinstance(value, dict):
        opt, sched = value.get("optimizer"), value.get("lr_scheduler")
    if not isinstance(opt, torch.optim.Optimizer):
        raise ModelDefinitionError(
            f"{type(model).__name__}.configure_optimizers returned {type(opt).__name__}; "
            f"return a torch.optim.Optimizer or (optimizer, lr_scheduler)."
        )
    return opt, sched


class _Precision:
    def __init__(self, precision: str, device: torch.device) -> None:
        import torch

        self.device_type = device.type
        self.dtype = {"bf16": torch.bfloat16, "16": torch.float16}.get(precision)
        self.scaler = None
        if precision == "16":
            self.scaler = torch.amp.GradScaler(device.type)

    def autocast(self) -> AbstractContextManager[object]:
        import torch

        if self.dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.dtype)


@contextlib.contextmanager
def _ddp_attached(model: TorchModel, wrapped: dict[str, torch.nn.parallel.DistributedDataParallel]
                  ) -> Iterator[None]:
    """The DDP wrappers are the model's attributes while training batches run (so
    ``self.net(x)`` goes through DDP); the plain modules are, everywhere else."""
    for name, ddp in wrapped.items():
        setattr(model, name, ddp)
    try:
        yield
    finally:
        for name, ddp in wrapped.items():
            setattr(model, name, ddp.module)


def _mean_across_ranks(local: dict[str, dict[str, tuple[float, float]]], world: int
                       ) -> dict[str, dict[str, float]]:
    """``{group: {key: (sum, count)}}`` of every rank -> ``{group: {key: sum / count}}``."""
    if world > 1:
        import torch.distributed as dist

        gathered: list[Any] = [None] * world
        dist.all_gather_object(gathered, local)
    else:
        gathered = [local]
    out: dict[str, dict[str, float]] = {}
    for group in local:
        totals: dict[str, list[float]] = {}
        for part in gathered:
            for key, (s, n) in part.get(group, {}).items():
                acc = totals.setdefault(key, [0.0, 0.0])
                acc[0] += s
                acc[1] += n
        out[group] = {k: (s / n if n else float("nan")) for k, (s, n) in totals.items()}
    return out


def _add(stats: dict[str, tuple[float, float]], key: str, value: float, n: int) -> None:
    s, c = stats.get(key, (0.0, 0.0))
    stats[key] = (s + value * n, c + n)


async def run_worker(payload_bytes: bytes, config: dict[str, Any]) -> None:
    """The per-worker function of a ``model.train`` job."""
    import torch

    from tandem import train
    from tandem.train import Checkpoint
    from tandem.train.torch import get_device

    payload: WorkerPayload = cloudpickle.loads(payload_bytes)
    settings = payload.settings
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    device = get_device() if settings.use_gpu else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)

    torch.manual_seed(payload.seed)
    model: TorchModel = payload.model_cls(config)
    setup: Any = model.setup  # may be async def
    await _maybe(setup())
    model.is_setup = True
    for module in model.modules().values():
        module.to(device)
    model.device = device
    if payload.init_weights is not None:
        model.load_weights_state(payload.init_weights)

    data = await _worker_data(payload, config, rank, world)
    opt, sched = _optimizers(model, await _maybe(model.configure_optimizers()))
    precision = _Precision(settings.precision, device)

    ckpt = train.get_checkpoint()
    start_epoch = _resume(ckpt, model, opt, sched, precision, device) if ckpt is not None else 0

    wrapped: dict[str, Any] = {}
    if world > 1:
        from torch.nn.parallel import DistributedDataParallel

        for name, module in model.modules().items():
            if any(p.requires_grad for p in module.parameters()):
                kwargs: dict[str, Any] = (
                    {"device_ids": [device.index]} if device.type == "cuda" else {})
                wrapped[name] = DistributedDataParallel(module, **kwargs)

    ident = identity_files(model) if rank == 0 else {}
    params = model.parameters()
    skip_bad = settings.on_nonfinite_loss == "skip"
    await _maybe(model.on_fit_start())
    for epoch in range(start_epoch + 1, settings.num_epochs + 1):
        t0 = time.perf_counter()
        await _maybe(model.on_epoch_start(epoch))
        train_stats: dict[str, tuple[float, float]] = {}
        seen = 0
        for module in model.modules().values():
            module.train()
        with _ddp_attached(model, wrapped):
            for batch_idx, batch in enumerate(data.train_batches(epoch)):
                if device.type != "cpu":
                    batch = _to_device(batch, device)
                await _maybe(model.on_batch_start(batch, batch_idx))
                with precision.autocast():
                    out = await _maybe(model.training_step(batch, batch_idx))
                loss, extra = split_output(model, out, epoch, batch_idx)
                value = float(loss.detach().float().item())
                finite = math.isfinite(value)
                if not finite and not skip_bad:
                    raise NonFiniteLossError(
                        f"{type(model).__name__}.training_step returned a loss of {value} at "
                        f"epoch {epoch}, batch {batch_idx} (rank {rank}); training stopped. "
                        f"Lower the learning rate or check the data, or pass "
                        f"train_settings={{'on_nonfinite_loss': 'skip'}} to skip such batches."
                    )
                opt.zero_grad(set_to_none=True)
                if precision.scaler is not None:
                    precision.scaler.scale(loss).backward()
                    precision.scaler.step(opt)
                    precision.scaler.update()
                else:
                    loss.backward()
                    if skip_bad and not _grads_finite(params):
                        opt.zero_grad(set_to_none=True)  # every rank sees the same all-reduced grads
                    else:
                        opt.step()
                n = _batch_len(batch)
                seen += n
                if finite:
                    _add(train_stats, "loss", value, n)
                for k, v in extra.items():
                    _add(train_stats, k, _number(v), n)
                await _maybe(model.on_batch_end(batch, batch_idx, out))
        if sched is not None:
            sched.step()
        train_time = time.perf_counter() - t0
        val_stats: dict[str, tuple[float, float]] = {}
        if data.has_valid:
            for module in model.modules().values():
                module.eval()
            with torch.no_grad():
                for batch_idx, batch in enumerate(data.valid_batches()):
                    if device.type != "cpu":
                        batch = _to_device(batch, device)
                    with precision.autocast():
                        out = await _maybe(model.validation_step(batch, batch_idx))
                    if out is None:
                        continue
                    if not isinstance(out, dict):
                        out = {"loss": out}
                    n = _batch_len(batch)
                    for k, v in out.items():
                        _add(val_stats, k, _number(v), n)
            for module in model.modules().values():
                module.train()
        means = _mean_across_ranks(
            {"train": train_stats, "val": val_stats, "n": {"samples": (float(seen), 1.0)}}, world)
        metrics: dict[str, Any] = {"epoch": epoch}
        metrics.update(means["train"])
        for k, v in means["val"].items():
            metrics[k if k.startswith("val_") else f"val_{k}"] = v
        epoch_time = time.perf_counter() - t0
        samples = means["n"].get("samples", 0.0) * world  # mean of counts x ranks
        metrics["epoch_time_s"] = round(epoch_time, 6)
        metrics["samples_per_s"] = round(samples / train_time, 3) if train_time > 0 else None
        await _maybe(model.on_epoch_end(epoch, metrics))
        if epoch % settings.checkpoint_every == 0 or epoch == settings.num_epochs:
            if rank == 0:
                d = tempfile.mkdtemp(prefix="tandem-model-ckpt-")
                try:
                    _write_checkpoint(d, model, ident, opt, sched, precision, epoch, payload)
                    train.report(metrics, checkpoint=Checkpoint.from_directory(d))
                finally:
                    shutil.rmtree(d, ignore_errors=True)
            else:
                train.report(metrics)
        else:
            train.report(metrics)
    await _maybe(model.on_fit_end())


def _resume(ckpt: Checkpoint, model: TorchModel, opt: torch.optim.Optimizer,
            sched: LRScheduler | ReduceLROnPlateau | None, precision: _Precision,
            device: torch.device) -> int:
    """Loads weights and optimizer state from a checkpoint; returns its epoch.

    A checkpoint written under another config (PBT continuing a trial from a donor's
    checkpoint with mutated hyperparameters) keeps the optimizer's state (momentum, Adam
    moments) but takes its hyperparameters (lr, ...) and schedule from the new config."""
    import torch

    with ckpt.as_directory() as d:
        model.load_weights(d)
        with open(os.path.join(d, TRAINER_STATE_FILE)) as f:
            trainer_state = json.load(f)
        same_config = trainer_state.get("config", _config_key(model)) == _config_key(model)
        state_path = os.path.join(d, OPTIMIZER_FILE)
        if os.path.exists(state_path):
            state = torch.load(state_path, map_location=device, weights_only=False)
            fresh = [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups]
            opt.load_state_dict(state["optimizer"])
            if not same_config:
                for group, hyper in zip(opt.param_groups, fresh):
                    group.update(hyper)
            if sched is not None and state.get("scheduler") is not None and same_config:
                sched.load_state_dict(state["scheduler"])
            if precision.scaler is not None and state.get("scaler") is not None:
                precision.scaler.load_state_dict(state["scaler"])
        return int(trainer_state["epoch"])


def _config_key(model: TorchModel) -> str:
    return json.dumps(_jsonable(model.config), sort_keys=True)


def _grads_finite(params: list[torch.nn.Parameter]) -> bool:
    import torch

    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return True
    return bool(torch.stack([torch.isfinite(g).all() for g in grads]).all())


def _write_checkpoint(d: str, model: TorchModel, ident: dict[str, bytes],
                      opt: torch.optim.Optimizer, sched: LRScheduler | ReduceLROnPlateau | None,
                      precision: _Precision, epoch: int, payload: WorkerPayload) -> None:

    import torch

    model.save_weights(d)
    for fname, blob in ident.items():
        with open(os.path.join(d, fname), "wb") as f:
            f.write(blob)
    torch.save({
        "optimizer": opt.state_dict(),
        "scheduler": sched.state_dict() if sched is not None else None,
        "scaler": precision.scaler.state_dict() if precision.scaler is not None else None,
    }, os.path.join(d, OPTIMIZER_FILE))
    with open(os.path.join(d, TRAINER_STATE_FILE), "w") as f:
        json.dump({"epoch": epoch, "num_epochs": payload.settings.num_epochs,
                   "seed": payload.seed, "config": _config_key(model)}, f)


async def _worker_data(payload: WorkerPayload, config: dict[str, Any], rank: int, world: int
                       ) -> WorkerData:
    settings = payload.settings
    if payload.data_source is not None:
        source: Any = payload.data_source
        if inspect.isclass(payload.data_source):
            factory: Any = payload.data_source
            source = factory(config)
        where = f"{type(source).__name__}.setup()"
        setup: Any = source.setup
        splits = check_splits(await _maybe(setup()), where)
        splits = {k: normalize(k, v, settings.label_column, where) for k, v in splits.items()}
        per_rank: set[str] = set()
    else:
        splits = {**payload.splits,
                  **rank_datasets(payload.datasets, payload.datasets_to_split, rank, world)}
        per_rank = set(payload.datasets)  # a torch Dataset (in payload.splits) is sampled
    return WorkerData(splits, rank, world, settings.batch_size, payload.seed, settings.shuffle,
                      per_rank=per_rank)
