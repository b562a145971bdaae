"""What a train server imports before its first job asks for it (issue 25).

A fresh server paid, in its first job's time, for two imports: the server process loading
the job's driver code (a Tuner's trial unpickles ``tandem.tune``, which brings numpy and
the schedulers) and the zygote importing the worker entry module before it forks a
worker. Measured on the 2-core machine, that made the first Tuner on a fresh server take
2-3 s longer than the same Tuner a moment later (docs/benchmarks.md, "Results on a train
server"). Both now start when the server starts, in the background: ``tandem server
start`` returns as soon as it listens, and a job submitted during the imports waits only
for what is left of them.
"""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Callable, Sequence

__all__ = ["DRIVER_MODULES", "WORKER_MODULES", "start_warmup"]

logger = logging.getLogger(__name__)

#: What the server process imports for the jobs' drivers (a trainer's controller, a
#: Tuner's trial): loading a submitted job unpickles them.
DRIVER_MODULES: tuple[str, ...] = ("tandem.train", "tandem.tune")

#: What the worker processes of the jobs import first: ``tandem.train``'s worker entry
#: point (every train run's preload) and ``tandem.tune`` (a Tuner's trials'). The zygote
#: imports them before its first fork, so the first job's workers start warm; a job that
#: preloads only some of them takes the same warm workers.
WORKER_MODULES: tuple[str, ...] = ("tandem.train._internal.worker", "tandem.tune")


def start_warmup(prewarm: Callable[[Sequence[str]], None] | None,
                 modules: Sequence[str] = DRIVER_MODULES) -> threading.Thread:
    """Asks the worker launcher to import ``WORKER_MODULES`` (``prewarm``: the cluster's,
    None for a cluster without one) and imports ``modules`` here, on a daemon thread of
    its own (returned, for tests). A module that does not import is logged and skipped:
    the job that needs it then says why."""
    if prewarm is not None:
        prewarm(WORKER_MODULES)

    def run() -> None:
        for name in modules:
            try:
                importlib.import_module(name)
            except Exception as e:  # noqa: BLE001 - a warm-up never takes the server down
                logger.warning("could not import %s ahead of the first job: %s", name, e)

    thread = threading.Thread(target=run, name="tandem-warmup", daemon=True)
    thread.start()
    return thread
