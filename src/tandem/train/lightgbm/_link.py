"""This worker's link to its LightGBM gang (metrics are combined over it): set by the
backend when the worker starts, read by the trainer and the report callback."""

from __future__ import annotations

from tandem.train._internal import gbdt

_LINK: list[gbdt.GangLink] = []


def gang_link() -> gbdt.GangLink | None:
    return _LINK[0] if _LINK else None
