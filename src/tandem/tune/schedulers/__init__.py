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
from tandem.tune.schedulers.hb_bohb import HyperBandForBOHB
from tandem.tune.schedulers.hyperband import HyperBandScheduler
from tandem.tune.schedulers.median import MedianStoppingRule
from tandem.tune.schedulers.pbt import PopulationBasedTraining, PopulationBasedTrainingReplay
from tandem.tune.schedulers.resource_changing_scheduler import (
    DistributeResources,
    DistributeResourcesToTopJob,
    ResourceChangingScheduler,
)

__all__ = [
    "CONTINUE",
    "ASHAScheduler",
    "Action",
    "AsyncHyperBandScheduler",
    "Decision",
    "DistributeResources",
    "DistributeResourcesToTopJob",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "PopulationBasedTrainingReplay",
    "ResourceChangingScheduler",
    "SuggestionAction",
    "TrialScheduler",
    "TrialSuggestion",
]


def __getattr__(name: str) -> object:
    if name == "PB2":  # imported lazily: it needs pandas and scikit-learn (Ray does the same)
        from tandem.tune.schedulers.pb2 import PB2

        return PB2
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
