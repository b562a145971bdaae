"""``ray.train.v2.api.callback``: ``UserCallback`` (``after_report``, ``after_exception``)."""

from __future__ import annotations

from tandem.train.api.callback import UserCallback

__all__ = ["UserCallback"]
