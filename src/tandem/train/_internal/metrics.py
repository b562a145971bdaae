"""What ``train.report`` does to metrics: plain JSON-able values, with a message naming the
first key that has none."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

_SCALARS = (int, float, str, bool, type(None))


def clean_metrics(metrics: Mapping[str, object]) -> dict[str, Any]:
    """Returns metrics as plain JSON-able values, converting 0-d tensors and NumPy scalars.

    Raises:
        TypeError: naming the first key whose value cannot be serialized.
    """
    if not isinstance(metrics, Mapping):
        raise TypeError(
            f"train.report(metrics=...) takes a dict of metric names to values, got "
            f"{type(metrics).__name__}: {metrics!r:.80}."
        )
    out: dict[str, Any] = {}
    for key, value in metrics.items():
        if not isinstance(key, str):
            raise TypeError(f"train.report(): metric names must be strings, got {key!r}.")
        if type(value) in _SCALARS:
            out[key] = value
        else:
            out[key] = _clean_value(key, value)
    return out


def _clean_value(key: str, value: object) -> object:
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {str(k): _clean_value(f"{key}/{k}", v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean_value(f"{key}[{i}]", v) for i, v in enumerate(value)]
    item = getattr(value, "item", None)
    if item is not None and getattr(value, "ndim", 1) == 0:
        v = item()
        if isinstance(v, float) and math.isnan(v):
            return v
        return v
    raise TypeError(
        f"train.report(): the metric {key!r} has a value of type {type(value).__module__}."
        f"{type(value).__qualname__} ({value!r:.60}), which cannot be serialized. Report "
        f"numbers, strings, booleans, or lists/dicts of them (convert a tensor or array with "
        f".item() or .tolist()); put large objects in a checkpoint instead."
    )
