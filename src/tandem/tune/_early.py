"""The worker side of a tuning program starts early (``tandem.train.early``): looking up
``tune.Tuner``/``tune.run``, building a ``Tuner`` or calling ``tune.run`` starts the zygote,
which imports the train worker code and ``tune.report``'s module while the driver goes on."""

from __future__ import annotations

#: What a trial's worker imports besides the train worker code: ``tune.report``'s module and
#: the function trainable's runner.
TRIAL_MODULES = ("tandem.tune.session", "tandem.tune.trainable")


def start_trial_workers_early() -> bool:
    from tandem.train.early import start_workers_early

    return start_workers_early(TRIAL_MODULES)
