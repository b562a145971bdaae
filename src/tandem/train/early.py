"""Starting the worker side before the first job asks for it (issue 25: the cold start).

A fresh program that runs one trial pays, on its critical path, for a fresh interpreter
(the zygote the workers fork from) and for the worker's imports of tandem's worker code,
after the driver has done its own imports. ``start_workers_early`` starts that zygote as
soon as the program shows it will run jobs here (``tune.Tuner``/``tune.run`` looked up or
called, a trainer built) and has it import the worker code at once, so both run on another
core while the driver goes on with its own imports and set-up; the first ``LocalCluster``
adopts it (``tandem.cluster.local.start_zygote_early``).

It does nothing (returns False) inside a worker, when a job service already runs in this
process (its cluster has its zygote; a server or Ray runs the jobs), when jobs go to a train
server (``$TANDEM_ADDRESS``, or a server file in ``~/.tandem`` without
``TANDEM_ADDRESS=local``), when a zygote was started early already (TensorFlow's), or with
``TANDEM_EARLY_IMPORT=0``, the switch of every early start (``tandem.jobs.early``; tests/conftest.py
turns it off, so that each test starts its own).
A zygote never used is ended by ``tandem.shutdown()`` or at exit.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

#: What every train worker imports before the user's function runs: the task's classes and
#: what unpickling them pulls in (the learned imports of a trivial run's worker).
WORKER_MODULES: tuple[str, ...] = ("tandem.train._internal.worker", "tandem.train._internal.nested",
                                   "tandem.train.backends.base", "tandem.train.api.result",
                                   "tandem.jobs.runtime")


def start_workers_early(extra: Sequence[str] = ()) -> bool:
    """Starts the zygote of this program's first local cluster now, importing the worker
    code and ``extra`` (modules of tandem that the jobs' workers will import), unless one
    of the rules in the module docstring says not to. Cheap when it does nothing (a few
    dictionary lookups), so entry points may call it every time."""
    from tandem.jobs.early import early_import_enabled

    if not early_import_enabled():
        return False
    worker_main = sys.modules.get("tandem.cluster._worker_main")
    if worker_main is not None and getattr(worker_main, "IN_WORKER_PROCESS", False):
        return False
    runtime = sys.modules.get("tandem.jobs.runtime")
    if runtime is not None and runtime.current_service() is not None:
        return False
    from tandem.jobs.client.discovery import env_address, read_server_file, wants_embedded

    if env_address() is not None or (not wants_embedded() and read_server_file()):
        return False
    from tandem.cluster.local import early_zygote_modules, start_zygote_early

    if early_zygote_modules() is not None:  # started already (by us, or for TensorFlow)
        return True
    return start_zygote_early((*WORKER_MODULES, *extra))
