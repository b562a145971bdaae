"""Integrations: ``TuneReportCallback`` for trial functions that fit a Trainer."""

from tandem.tune.integration.ray_train import TuneReportCallback

__all__ = ["TuneReportCallback"]
