"""Splitting in-memory datasets into equal per-rank shards."""

from __future__ import annotations

from typing import Any

from tandem._core.errors import ConfigError

SUPPORTED = (
    "a list/tuple/range, a NumPy array, a pandas DataFrame or Series, a pyarrow Table, "
    "a torch Dataset (with __len__ and __getitem__), or a ray.data.Dataset on the Ray backend"
)


def is_ray_dataset(data: Any) -> bool:
    return type(data).__module__.startswith("ray.data")


def split(name: str, data: Any, n: int, ray_split: bool = False) -> list[Any]:
    """``n`` contiguous shards of equal length (a remainder of < n rows is dropped, so every
    rank runs the same number of steps and DDP collectives never wait on a missing peer).

    A ``ray.data.Dataset`` is split with ``streaming_split(n, equal=True)`` when
    ``ray_split`` (the Ray backend, which passes the iterators to its actors); elsewhere
    every rank gets the whole dataset."""
    module = type(data).__module__
    if is_ray_dataset(data):
        if ray_split and hasattr(data, "streaming_split"):
            return list(data.streaming_split(n, equal=True))
        return [data] * n
    try:
        length = len(data)
    except TypeError:
        raise ConfigError(
            f"datasets[{name!r}] is a {type(data).__name__}, which tandem cannot split by "
            f"rank. Give {SUPPORTED}."
        ) from None
    per = length // n
    bounds = [(r * per, (r + 1) * per) for r in range(n)]
    if isinstance(data, (list, tuple, range)):
        return [data[a:b] for a, b in bounds]
    if module.startswith("numpy"):
        return [data[a:b] for a, b in bounds]
    if module.startswith("pandas"):
        return [data.iloc[a:b] for a, b in bounds]
    if module.startswith("pyarrow"):
        return [data.slice(a, b - a) for a, b in bounds]
    if hasattr(data, "__getitem__") and any(
        c.__module__.startswith("torch.utils.data") for c in type(data).__mro__
    ):
        from torch.utils.data import Subset

        return [Subset(data, range(a, b)) for a, b in bounds]
    raise ConfigError(
        f"datasets[{name!r}] is a {type(data).__module__}.{type(data).__name__}, which tandem "
        f"cannot split by rank. Give {SUPPORTED}."
    )
