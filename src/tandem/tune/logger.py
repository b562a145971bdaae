"""``ray.tune.logger``'s path: ``LoggerCallback`` (the base of experiment loggers) and the
TensorBoard logger callback.

Every trial writes ``result.json`` and ``progress.csv`` anyway (what Ray's
``JsonLoggerCallback`` and ``CSVLoggerCallback`` add), so only ``TBXLoggerCallback`` is here.
"""

from __future__ import annotations

import json
from typing import Any

from tandem.tune.callback import LoggerCallback, TBXLoggerCallback

__all__ = ["LoggerCallback", "TBXLoggerCallback", "pretty_print"]


def pretty_print(result: dict[str, Any], exclude: set[str] | None = None) -> str:
    """A result dict as YAML text, without ``config``, ``hist_stats``, None values and the
    keys in ``exclude`` (Ray's ``pretty_print``); values YAML cannot hold are shown as
    strings."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    out = {k: v for k, v in result.items()
           if k not in ("config", "hist_stats") and v is not None
           and (exclude is None or k not in exclude)}
    cleaned = json.loads(json.dumps(out, default=_fallback))
    return str(yaml.safe_dump(cleaned, default_flow_style=False))


def _fallback(value: Any) -> Any:
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return str(value)
