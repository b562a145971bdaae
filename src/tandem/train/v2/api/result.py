"""``ray.train.v2.api.result``: what ``fit()`` returns."""

from __future__ import annotations

from tandem.train.api.result import Result

__all__ = ["Result"]
