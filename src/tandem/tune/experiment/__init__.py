"""``ray.tune.experiment``: ``Experiment`` (an experiment described as one object, run by
``tune.run(experiment)`` or ``tune.run_experiments``) and ``Trial`` (the trial objects
callbacks and schedulers receive)."""

from __future__ import annotations

from tandem.tune.experiment.experiment import Experiment
from tandem.tune.trial import Trial

__all__ = ["Experiment", "Trial"]
