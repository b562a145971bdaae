"""``ray.train.v2.api.exceptions``: the error ``fit()`` raises when the run fails."""

from __future__ import annotations

from tandem.train.api.errors import TrainingFailedError

__all__ = ["TrainingFailedError"]
