"""Ray's ``ray.air.integrations.wandb``: ``WandbLoggerCallback`` and ``setup_wandb``
(defined in :mod:`tandem.tune.integration.wandb`; its docstring says where tandem differs)."""

from tandem.tune.integration.wandb import WandbLoggerCallback, setup_wandb

__all__ = ["WandbLoggerCallback", "setup_wandb"]
