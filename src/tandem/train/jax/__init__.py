"""JAX on tandem: ``JaxTrainer`` and ``JaxConfig`` (Ray's ``ray.train.v2.jax``; also at
``tandem.train.v2.jax``). Importing this module does not import JAX."""

from __future__ import annotations

from tandem.train.backends.jax import JaxConfig
from tandem.train.jax.trainer import JaxTrainer

__all__ = ["JaxConfig", "JaxTrainer"]
