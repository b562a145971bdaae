"""Ray's ``ray.air.integrations.mlflow``: ``MLflowLoggerCallback`` and ``setup_mlflow``
(defined in :mod:`tandem.tune.integration.mlflow`; its docstring says what is logged)."""

from tandem.tune.integration.mlflow import MLflowLoggerCallback, setup_mlflow

__all__ = ["MLflowLoggerCallback", "setup_mlflow"]
