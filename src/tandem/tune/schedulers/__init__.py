"""Trial schedulers: policies that continue, pause, stop or restart trials from results."""

from __future__ import annotations

from tandem.tune.schedulers.asha import ASHAScheduler, AsyncHyperBandScheduler
from tandem.tune.schedulers.base import (
    CONTINUE,
    Action,
    Decision,
    SuggestionAction,
    TrialScheduler,
    TrialSuggestion,
)
from tandem.tune.schedulers.fifo import FIFOScheduler
from tandem.tune.schedulers.hyperband import HyperBandScheduler
from tandem.tune.schedulers.median import MedianStoppingRule
from tandem.tune.schedulers.pbt import PopulationBasedTraining

__all__ = [
    "CONTINUE",
    "ASHAScheduler",
    "Action",
    "AsyncHyperBandScheduler",
    "Decision",
    "FIFOScheduler",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "SuggestionAction",
    "TrialScheduler",
    "TrialSuggestion",
]
