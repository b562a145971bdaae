"""Datasets for ``model.train``: resolved and checked on the driver, sharded per worker.

``dataset=`` is a dict ``{"train": ..., "valid": ...}`` (``"valid"`` optional), or a class
or object whose ``setup()`` returns one (a class is built as ``DataClass(config)``; both run
on each worker). Each value is

- a torch ``Dataset``: every worker holds it; a ``DistributedSampler`` picks each worker's
  part anew every epoch;
- ``(X, y)`` arrays or tensors, or a pandas DataFrame with ``label_column``: split into even
  contiguous shards (``len // num_workers`` rows each, the remainder dropped, so every rank
  runs the same number of DDP steps), each shard reshuffled every epoch with
  ``torch.randperm(len(shard), generator=torch.Generator().manual_seed(seed + epoch))``;
- a ``ray.data.Dataset`` (on Ray: Ray Data's streaming split).

Validation data is never dropped or padded: worker ``r`` of ``n`` validates rows
``r, r + n, r + 2n, ...``, so the averaged metrics cover every row exactly once.
"""

from __future__ import annotations

import inspect
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from tandem._core.errors import ConfigError
from tandem.train import DataConfig

SPLITS = ("train", "valid")
KINDS = (
    "a torch Dataset, a tuple (X, y) of arrays or tensors, a pandas DataFrame (with "
    "label_column in the train settings) or a ray.data.Dataset"
)


class DataError(ConfigError):
    """A dataset given to ``model.train`` cannot be used; the message names its key."""


def is_ray_dataset(data: object) -> bool:
    return type(data).__module__.startswith("ray.data")


def _is_torch_dataset(data: object) -> bool:
    return any(c.__module__.startswith("torch.utils.data") and c.__name__ == "Dataset"
               for c in type(data).__mro__) and hasattr(data, "__getitem__")


def _is_dataframe(data: object) -> bool:
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns")


def _length(x: Any) -> int:
    shape = getattr(x, "shape", None)
    if shape is not None and len(shape) > 0:
        return int(shape[0])
    return len(x)


def is_data_source(dataset: object) -> bool:
    """A class, or an object with ``setup()``, whose datasets are made on each worker."""
    if isinstance(dataset, Mapping):
        return False
    if inspect.isclass(dataset):
        return True
    return callable(getattr(dataset, "setup", None))


def check_source(dataset: object) -> None:
    if inspect.isclass(dataset) and not callable(getattr(dataset, "setup", None)):
        raise DataError(
            f"dataset={dataset.__name__}: a data class needs a setup() method returning "
            f'{{"train": ..., "valid": ...}}; {dataset.__name__} has none.'
        )


def check_splits(datasets: object, where: str) -> dict[str, Any]:
    """The dict of splits, or a ``DataError`` naming what is wrong with it."""
    if not isinstance(datasets, Mapping):
        raise DataError(
            f"{where} must be a dict {{'train': ..., 'valid': ...}} (or a class/object whose "
            f"setup() returns one); got {type(datasets).__name__}."
        )
    unknown = [k for k in datasets if k not in SPLITS]
    if unknown:
        raise DataError(
            f"{where} has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}; the keys are 'train' (required) and "
            f"'valid' (optional)."
        )
    if "train" not in datasets or datasets["train"] is None:
        raise DataError(
            f"{where} has no 'train' data (keys given: {sorted(datasets)}). Give "
            f"{{'train': train_data, 'valid': valid_data}}."
        )
    return {k: v for k, v in datasets.items() if v is not None}


@dataclass(eq=False)
class Arrays(Sequence[Any]):
    """``(X, y)`` as NumPy arrays or torch tensors (y may be None).

    A ``Sequence`` of rows, so the train layer splits it by rank as it splits any sequence
    (``arrays[a:b]`` is an ``Arrays`` again)."""

    x: Any
    y: Any

    def __len__(self) -> int:
        return _length(self.x)

    def take(self, index: object) -> Arrays:
        return Arrays(self.x[index], None if self.y is None else self.y[index])

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> Arrays: ...

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return self.take(index)
        if not -len(self) <= index < len(self):
            raise IndexError(f"row {index} of {len(self)}")
        return self.x[index] if self.y is None else (self.x[index], self.y[index])


def normalize(name: str, data: Any, label_column: str | None, where: str) -> Any:
    """Checks one split and turns DataFrames and tuples into ``Arrays``; a torch Dataset or
    a ray.data.Dataset is returned as is."""
    key = f"{where}[{name!r}]"
    if is_ray_dataset(data) or _is_torch_dataset(data):
        if _is_torch_dataset(data):
            try:
                n = len(data)
            except TypeError:
                raise DataError(
                    f"{key} is a torch Dataset without __len__; model.train needs a map-style "
                    f"Dataset (with __len__ and __getitem__)."
                ) from None
            if n == 0:
                raise DataError(f"{key} is an empty torch Dataset.")
        return data
    if _is_dataframe(data):
        if label_column is None:
            raise DataError(
                f"{key} is a pandas DataFrame, so model.train needs to know its label: set "
                f"train_settings={{'label_column': ...}} to one of its columns "
                f"{list(data.columns)[:20]}."
            )
        if label_column not in data.columns:
            raise DataError(
                f"{key}: label_column {label_column!r} is not a column of the DataFrame; its "
                f"columns are {list(data.columns)[:20]}."
            )
        features = data.drop(columns=[label_column])
        bad = [c for c, t in features.dtypes.items() if t.kind not in "biuf"]
        if bad:
            raise DataError(
                f"{key}: feature column{'s' if len(bad) > 1 else ''} {bad} "
                f"{'are' if len(bad) > 1 else 'is'} not numeric; encode them (e.g. "
                f"pd.get_dummies) or drop them before training."
            )
        return Arrays(features.to_numpy(), data[label_column].to_numpy())
    if isinstance(data, (tuple, list)) and len(data) in (1, 2) and not isinstance(data[0], (int, float)):
        x = data[0]
        y = data[1] if len(data) == 2 else None
        for part, what in ((x, "X"), (y, "y")):
            if part is None:
                continue
            if not (hasattr(part, "shape") or isinstance(part, (list, tuple))):
                raise DataError(
                    f"{key}: {what} is a {type(part).__name__}; give NumPy arrays or torch "
                    f"tensors."
                )
        x = _as_array(x)
        y = _as_array(y) if y is not None else None
        if y is not None and _length(x) != _length(y):
            raise DataError(
                f"{key}: X has {_length(x)} rows but y has {_length(y)}; they must have the "
                f"same length."
            )
        if _length(x) == 0:
            raise DataError(f"{key}: X has no rows.")
        return Arrays(x, y)
    raise DataError(
        f"{key} is a {type(data).__module__}.{type(data).__name__}; give {KINDS}."
    )


def _as_array(x: object) -> object:
    if isinstance(x, (list, tuple)):
        import numpy as np

        return np.asarray(x)
    return x


def even_shard(data: Arrays, rank: int, world: int) -> Arrays:
    """Rows ``[rank * per, (rank + 1) * per)`` with ``per = len // world``."""
    per = len(data) // world
    return data.take(slice(rank * per, (rank + 1) * per))


def strided_shard(data: Arrays, rank: int, world: int) -> Arrays:
    """Rows ``rank, rank + world, ...``: every row on exactly one worker."""
    return data.take(slice(rank, None, world))


@dataclass(frozen=True)
class TrainerData:
    """How ``model.train`` hands its splits to the trainer, decided once on the driver.

    ``datasets`` are the trainer's (Ray's ``datasets=``): arrays and ``ray.data`` Datasets.
    ``config`` (a ``DataConfig``) splits the training arrays by rank in the train layer
    (even contiguous shards, as ``even_shard``) and every ``ray.data`` Dataset (Ray Data's
    streaming split); the validation arrays reach every worker whole, and each takes rows
    ``rank, rank + n, ...`` (``strided_shard``), so no validation row is dropped. A torch
    Dataset is not a trainer dataset: it travels in the job payload (``payload_splits``)
    and a ``DistributedSampler`` picks each worker's part every epoch."""

    datasets: dict[str, Any] = field(default_factory=dict)
    to_split: tuple[str, ...] = ()
    payload_splits: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, splits: Mapping[str, object]) -> TrainerData:
        datasets, to_split, payload = {}, [], {}
        for name, value in splits.items():
            if isinstance(value, Arrays) or is_ray_dataset(value):
                datasets[name] = value
                if name == "train" or is_ray_dataset(value):
                    to_split.append(name)
            else:
                payload[name] = value
        return cls(datasets, tuple(to_split), payload)

    @property
    def config(self) -> DataConfig:
        return DataConfig(datasets_to_split=list(self.to_split))


def rank_datasets(names: Collection[str], to_split: Collection[str], rank: int, world: int
                  ) -> dict[str, Any]:
    """On a worker: this rank's part of each trainer dataset in ``names`` (see
    ``TrainerData``): the shard the train layer gave it, or its strided rows of a whole one."""
    from tandem import train

    out: dict[str, Any] = {}
    for name in names:
        shard = train.get_dataset_shard(name)
        if name not in to_split and isinstance(shard, Arrays):
            shard = strided_shard(shard, rank, world)
        out[name] = shard
    return out


def check_sizes(splits: Mapping[str, Any], num_workers: int, where: str) -> None:
    train = splits["train"]
    if isinstance(train, Arrays) or _is_torch_dataset(train):
        n = len(train)
        if n < num_workers:
            raise DataError(
                f"{where}['train'] has {n} rows, fewer than num_workers={num_workers}: every "
                f"worker needs at least one. Use fewer workers or more data."
            )


# -- on the worker ---------------------------------------------------------------------


def float32_arrays(shard: Any) -> tuple[Any, Any]:
    """A shard's ``(x, y)`` as numpy arrays, floats as float32 (what the JAX and
    TensorFlow models' loops train on); other dtypes (integer labels) kept."""
    import numpy as np

    x = np.asarray(shard.x)
    if x.dtype.kind == "f":
        x = x.astype(np.float32)
    y = np.asarray(shard.y)
    if y.dtype.kind == "f":
        y = y.astype(np.float32)
    return x, y


def _tensor(x: object, label: bool = False) -> object:
    import numpy as np
    import torch

    if isinstance(x, torch.Tensor):
        t = x
    else:
        arr = np.asarray(x)
        if arr.dtype == object:
            raise DataError(
                f"A {'label' if label else 'feature'} array has dtype object; give numbers."
            )
        t = torch.from_numpy(np.ascontiguousarray(arr))
    if t.is_floating_point() and t.dtype == torch.float64:
        t = t.float()
    if label and t.dtype in (torch.int32, torch.int16, torch.int8, torch.uint8):
        t = t.long()
    return t


class WorkerData:
    """One worker's training and validation batches.

    ``train_batches(epoch)`` yields this epoch's batches of the worker's shard;
    ``valid_batches()`` yields the worker's validation rows (never padded)."""

    def __init__(self, splits: Mapping[str, Any], rank: int, world: int, batch_size: int,
                 seed: int, shuffle: bool, per_rank: Collection[str] = ()) -> None:
        """``per_rank``: the splits that are this worker's part already (the rest are whole:
        arrays are sharded here, a torch Dataset is sampled)."""
        self.rank = rank
        self.world = world
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self._train = self._prepare(splits["train"], "train", "train" in per_rank)
        valid = splits.get("valid")
        self._valid = (self._prepare(valid, "valid", "valid" in per_rank)
                       if valid is not None else None)

    @property
    def has_valid(self) -> bool:
        return self._valid is not None

    def _prepare(self, data: Any, split: str, presharded: bool) -> object:
        if isinstance(data, Arrays):
            if not presharded:
                data = (even_shard if split == "train" else strided_shard)(
                    data, self.rank, self.world)
            return Arrays(_tensor(data.x), None if data.y is None else _tensor(data.y, True))
        if _is_torch_dataset(data):
            from torch.utils.data import DataLoader, DistributedSampler, Subset

            if split == "train":
                sampler: Any = DistributedSampler(data, num_replicas=self.world, rank=self.rank,
                                             shuffle=self.shuffle, seed=self.seed)
                return DataLoader(data, batch_size=self.batch_size, sampler=sampler)
            part = Subset(data, range(self.rank, len(data), self.world))
            return DataLoader(part, batch_size=self.batch_size, shuffle=False)
        if is_ray_dataset(data) or hasattr(data, "iter_torch_batches"):
            if hasattr(data, "streaming_split") and self.world > 1:
                raise DataError(
                    f"dataset[{split!r}] is a ray.data.Dataset, which is split across workers "
                    f"only on the Ray cluster (tandem.init(cluster='ray')). On this cluster "
                    f"give it as a DataFrame (ds.to_pandas()) or arrays."
                )
            return data  # this worker's part of Ray Data's streaming split (or the whole)
        raise DataError(f"dataset[{split!r}] on the worker is a {type(data).__name__}; give {KINDS}.")

    def num_train_rows(self) -> int | None:
        data = self._train
        if isinstance(data, Arrays):
            return len(data)
        sampler = getattr(data, "sampler", None)
        if sampler is not None:
            return len(sampler)
        return None

    def train_batches(self, epoch: int) -> Iterator[Any]:
        return self._batches(self._train, epoch, train=True)

    def valid_batches(self) -> Iterator[Any]:
        if self._valid is None:
            return iter(())
        return self._batches(self._valid, 0, train=False)

    def _batches(self, data: Any, epoch: int, train: bool) -> Iterator[object]:
        import torch

        bs = self.batch_size
        if isinstance(data, Arrays):
            n = len(data)
            x, y = data.x, data.y
            if train and self.shuffle:
                g = torch.Generator()
                g.manual_seed(self.seed + epoch)
                perm = torch.randperm(n, generator=g)
                for i in range(0, n, bs):
                    idx = perm[i:i + bs]
                    yield x[idx] if y is None else (x[idx], y[idx])
            else:
                for i in range(0, n, bs):
                    yield x[i:i + bs] if y is None else (x[i:i + bs], y[i:i + bs])
            return
        if hasattr(data, "sampler") and hasattr(data.sampler, "set_epoch"):
            data.sampler.set_epoch(epoch)
            yield from data
            return
        if hasattr(data, "iter_torch_batches"):  # ray.data Dataset / DataIterator
            yield from data.iter_torch_batches(batch_size=bs)
            return
        yield from data
