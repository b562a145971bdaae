"""Trial schedulers: policies that continue, pause, stop or restart trials from results."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
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
    from tandem.tune.schedulers.pb2 import PB2  # noqa: F401 - not in __all__, as in Ray
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


# Imported when first used (``tandem._core.lazy``); PB2 needs pandas and scikit-learn.
__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "ASHAScheduler": "tandem.tune.schedulers.asha",
    "AsyncHyperBandScheduler": "tandem.tune.schedulers.asha",
    "CONTINUE": "tandem.tune.schedulers.base",
    "Action": "tandem.tune.schedulers.base",
    "Decision": "tandem.tune.schedulers.base",
    "SuggestionAction": "tandem.tune.schedulers.base",
    "TrialScheduler": "tandem.tune.schedulers.base",
    "TrialSuggestion": "tandem.tune.schedulers.base",
    "FIFOScheduler": "tandem.tune.schedulers.fifo",
    "HyperBandForBOHB": "tandem.tune.schedulers.hb_bohb",
    "HyperBandScheduler": "tandem.tune.schedulers.hyperband",
    "MedianStoppingRule": "tandem.tune.schedulers.median",
    "PopulationBasedTraining": "tandem.tune.schedulers.pbt",
    "PopulationBasedTrainingReplay": "tandem.tune.schedulers.pbt",
    "DistributeResources": "tandem.tune.schedulers.resource_changing_scheduler",
    "DistributeResourcesToTopJob": "tandem.tune.schedulers.resource_changing_scheduler",
    "ResourceChangingScheduler": "tandem.tune.schedulers.resource_changing_scheduler",
    "PB2": "tandem.tune.schedulers.pb2",
})
