"""``ray.train.v2.api.context``: what ``train.get_context()`` returns."""

from __future__ import annotations

from tandem.train.context import TrainContext

__all__ = ["TrainContext"]
