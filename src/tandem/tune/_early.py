"""The worker side of a tuning program starts early (``tandem.train.early``): looking up
``tune.Tuner``/``tune.run``, building a ``Tuner`` or calling ``tune.run`` starts the zygote,
which imports the train worker code and ``tune.report``'s module while the driver goes on."""

from __future__ import annotations

#: What a trial's worker imports besides the train worker code: ``tune.report``'s module and
#: the function trainable's runner, and ``tandem.tune`` itself, the name a trial's job asks
#: the cluster to preload (without it there, the first job's preload was one more round
#: of the zygote's, and a new generation of warm workers, before the first trial ran); and
#: a trial stream's worker code (``tandem.train._internal.stream``, ``tandem.cluster.reuse``:
#: ~10 ms that each of the first slot workers imported after its fork).
TRIAL_MODULES = ("tandem.tune", "tandem.tune.session", "tandem.tune.trainable",
                 "tandem.train._internal.stream", "tandem.cluster.reuse")


def start_trial_workers_early() -> bool:
    from tandem.train.early import start_workers_early

    return start_workers_early(TRIAL_MODULES)
