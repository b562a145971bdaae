"""``tandem.air``: the module paths Ray AIR users import, kept so a Ray program ports by
changing ``ray`` to ``tandem`` in its imports.

- ``tandem.air.integrations.mlflow``: ``MLflowLoggerCallback``, ``setup_mlflow``;
- ``tandem.air.integrations.wandb``: ``WandbLoggerCallback``, ``setup_wandb``;
- ``tandem.air``: the configs and ``Result`` (``from ray.air import RunConfig``...).

A thin compatibility layer: everything here is defined in ``tandem.tune`` / ``tandem.train``
and re-exported. In the layer order it sits beside ``tandem.model``, above ``tandem.tune``.
"""

from tandem.train.api.config import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
from tandem.train.api.result import Result

__all__ = ["CheckpointConfig", "FailureConfig", "Result", "RunConfig", "ScalingConfig"]
