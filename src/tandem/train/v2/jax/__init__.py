"""``ray.train.v2.jax``'s path: ``JaxTrainer`` and ``JaxConfig`` (see ``tandem.train.jax``)."""

from __future__ import annotations

from tandem.train.jax import JaxConfig, JaxTrainer

__all__ = ["JaxConfig", "JaxTrainer"]
