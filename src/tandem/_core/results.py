"""Reading a result row the way stop criteria name its keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MISSING: Any = object()
"""What :func:`lookup` returns for a key the result does not have."""


def lookup(result: Mapping[str, object], key: str) -> Any:
    """``result[key]``, or ``"a/b"`` read as nested keys (as ``RunConfig(stop=...)`` and
    Ray's stop criteria do); :data:`MISSING` when neither is there. One function, so the
    stop criteria and the reports that wait for their verdict read a key the same way."""
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return MISSING
        node = node[part]
    return node
