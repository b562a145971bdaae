"""When to start the workers' heavy imports early: one policy for every framework.

A program that imports ``tandem.train.torch`` (or ``tandem.train.tensorflow``, builds a
``TorchTrainer``, defines a ``TorchModel``, imports ``tandem.model``, calls ``model.serve``)
will soon fork workers that need torch (TensorFlow, ...). ``start_early`` has the process
those workers fork from (the zygote, ``tandem.cluster.local``) start and import them now,
while the program goes on with its own imports, data and set-up, instead of inside the
first ``fit``/``serve``. It does nothing (returns False):

- with ``TANDEM_EARLY_IMPORT=0`` (``TANDEM_TF_EARLY_IMPORT``, its older name, is read when
  the new one is not set);
- inside a worker process;
- when jobs go elsewhere: a train server (``$TANDEM_ADDRESS``, or a server file in
  ``~/.tandem`` without ``TANDEM_ADDRESS=local``) or Ray; a zygote started early is ended as
  soon as the process's job service turns out not to be local (``runtime._note_service``).

With a local cluster running, its zygote is told to import them (``prewarm``); with none
yet, the zygote is started ahead of the cluster (``start_zygote_early``), which adopts it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

EARLY_IMPORT_ENV = "TANDEM_EARLY_IMPORT"
#: TensorFlow's switch before it covered every framework; read when the new one is unset
EARLY_IMPORT_ALIAS = "TANDEM_TF_EARLY_IMPORT"

_OFF = ("0", "false", "no", "off")


def early_import_enabled() -> bool:
    """False when ``$TANDEM_EARLY_IMPORT`` (else ``$TANDEM_TF_EARLY_IMPORT``) is 0/false/
    no/off."""
    raw = os.environ.get(EARLY_IMPORT_ENV)
    if raw is None:
        raw = os.environ.get(EARLY_IMPORT_ALIAS, "1")
    return raw.strip().lower() not in _OFF


def start_early(preload: Sequence[str], conflicts: Sequence[str] = ()) -> bool:
    """Starts importing ``preload`` where this program's workers will fork from, without
    waiting and without importing anything here; True when that happens (module doc).

    ``conflicts``: modules that cannot share a process with ``preload`` (TensorFlow's other
    Keras): a zygote started early that imported one is replaced rather than extended."""
    if not early_import_enabled():
        return False
    from tandem.cluster.local import (
        LocalCluster,
        discard_early_zygote,
        early_zygote_modules,
        in_worker_process,
        start_zygote_early,
    )
    from tandem.jobs import runtime
    from tandem.jobs.client.discovery import env_address, read_server_file, wants_embedded

    if in_worker_process():
        return False
    preload = tuple(preload)
    service = runtime.current_service()
    if service is not None:
        cluster = getattr(service, "cluster", None)
        if not isinstance(cluster, LocalCluster):
            discard_early_zygote()  # jobs go to a server or Ray: no local worker forks from it
            return False
        early = early_zygote_modules()
        if early is not None and set(early) & set(conflicts):
            # started for the other Keras and not adopted yet: the cluster adopts a new one
            start_zygote_early(preload, replace=True)
        cluster.prewarm(preload)
        return True
    if env_address() is not None or (not wants_embedded() and read_server_file()):
        return False
    early = early_zygote_modules()
    return start_zygote_early(
        preload, replace=early is not None and bool(set(early) & set(conflicts)))

