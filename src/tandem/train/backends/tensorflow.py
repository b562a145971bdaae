"""The TensorFlow backend: ``TF_CONFIG`` per rank, so ``tf.distribute.MultiWorkerMirroredStrategy``
joins the gang's workers into one collective.

Every rank picks a free port on its node; the ranks exchange ``host:port`` through a small
all-gather over the driver's rendezvous; each then sets ``TF_CONFIG`` to
``{"cluster": {"worker": [every address, rank order]}, "task": {"type": "worker", "index":
rank}}`` (Ray's layout), before the train function imports TensorFlow. TensorFlow itself
is not imported here.

Keras: Keras 3 (``keras``, what ``tf.keras`` is by default since TF 2.16) cannot
``fit`` under ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585: "Attempt to convert
a value (PerReplica ...)"). When the ``tf_keras`` package (Keras 2) is installed and the
user has not set ``TF_USE_LEGACY_KERAS``, workers get ``TF_USE_LEGACY_KERAS=1``, so
``tf.keras`` is Keras 2 and Ray's Keras programs run unchanged (Ray's own examples set the
same variable). ``TensorflowConfig(legacy_keras=False)`` leaves ``tf.keras`` alone.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tandem._core.errors import ConfigError
from tandem._core.extras import TF_KERAS_INSTALL, install_command
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    from tandem.train.context import TrainContext

INSTALL_HINT = f"{install_command('tensorflow')} && {TF_KERAS_INSTALL}"


def require_tensorflow(what: str) -> None:
    """Raises ``ModuleNotFoundError`` naming the extra when TensorFlow is not installed
    (checked without importing it)."""
    if importlib.util.find_spec("tensorflow") is None:
        raise ModuleNotFoundError(
            f"{what} needs TensorFlow, which is not installed. Install tandem's 'tensorflow' "
            f"extra: {INSTALL_HINT}"
        )


class TensorflowConfig(BackendConfig):
    """Ray's ``TensorflowConfig`` (no settings there); tandem adds one.

    Args:
        legacy_keras: True: ``tf.keras`` is Keras 2 (``tf_keras``) on the workers, the only
            Keras that can ``fit`` under ``MultiWorkerMirroredStrategy``; False: leave
            ``tf.keras`` as installed; None (default): Keras 2 when ``tf_keras`` is
            installed and ``TF_USE_LEGACY_KERAS`` is not set already.
    """

    def __init__(self, legacy_keras: bool | None = None) -> None:
        if legacy_keras is not None and not isinstance(legacy_keras, bool):
            raise ConfigError(
                f"TensorflowConfig(legacy_keras={legacy_keras!r}): use True, False or None."
            )
        self.legacy_keras = legacy_keras

    def backend(self) -> Backend:
        require_tensorflow("TensorflowConfig")
        return TensorflowBackend(self.legacy_keras)

    def __repr__(self) -> str:
        return "TensorflowConfig()" if self.legacy_keras is None else \
            f"TensorflowConfig(legacy_keras={self.legacy_keras})"


class TensorflowBackend(Backend):
    """Sets ``TF_CONFIG`` (and the thread counts, from the worker's CPU share) in each worker
    before the train function runs; TensorFlow forms the collective when the function
    creates its ``MultiWorkerMirroredStrategy``."""

    def __init__(self, legacy_keras: bool | None = None, timeout_s: float = 300.0) -> None:
        self.legacy_keras = legacy_keras
        self.timeout_s = timeout_s
        # TensorFlow (with the Keras the workers will use) imported once in the process workers
        # fork from, rather than by each worker of each run
        self.preload = ("tandem.train._internal.gbdt.collective",  # TF_CONFIG's all-gather
                        "tandem.train.tensorflow._preload_keras2" if self._use_legacy_keras()
                        else "tandem.train.tensorflow._preload")

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{"TANDEM_GBDT_NODE_IP": ip} for ip in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        from tandem.train._internal.gbdt.collective import GangLink, free_port, node_ip

        threads = os.environ.get("TANDEM_NUM_THREADS", "")
        if threads and threads != "0":
            os.environ.setdefault("TF_NUM_INTRAOP_THREADS", threads)
            os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1" if threads == "1" else "2")
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no per-op INFO lines in the logs
        if self._use_legacy_keras():
            os.environ["TF_USE_LEGACY_KERAS"] = "1"
        _check_inherited_keras()
        host = node_ip()
        address = f"{host}:{free_port(host)}"
        if context.world_size == 1:
            addresses = [address]
        else:
            link = GangLink(context.world_rank, context.world_size, self.timeout_s)
            try:
                addresses = [str(a) for a in link.allgather(address)]
            finally:
                link.close()
        os.environ["TF_CONFIG"] = tf_config(addresses, context.world_rank)

    def _use_legacy_keras(self) -> bool:
        if self.legacy_keras is not None:
            return self.legacy_keras
        return "TF_USE_LEGACY_KERAS" not in os.environ and \
            importlib.util.find_spec("tf_keras") is not None

    def on_worker_shutdown(self, context: TrainContext) -> None:
        os.environ.pop("TF_CONFIG", None)


def _check_inherited_keras() -> None:
    """A worker forked with TensorFlow already imported (for an earlier run of this session)
    has the Keras TensorFlow bound at that import (``tensorflow.keras``, ``tf.optimizers``);
    refuses to run when this run wants the other one, rather than mixing the two."""
    tf = sys.modules.get("tensorflow")
    if tf is None:
        return
    imported_keras2 = any("tf_keras" in str(p) for p in getattr(tf, "__path__", []))
    wanted_keras2 = os.environ.get("TF_USE_LEGACY_KERAS") in ("1", "true", "True")
    if imported_keras2 != wanted_keras2:
        have, want = ("Keras 2 (tf_keras)", "Keras 3") if imported_keras2 else \
            ("Keras 3", "Keras 2 (tf_keras)")
        raise RuntimeError(
            f"This worker's TensorFlow was imported for {have} by an earlier run of this "
            f"session (tandem imports TensorFlow once, where workers fork from), and this run "
            f"wants {want}; TensorFlow binds its Keras at import. Use one Keras per session "
            f"(the same TensorflowConfig(legacy_keras=...) and TF_USE_LEGACY_KERAS), or start "
            f"a new one (tandem.shutdown(); tandem.init()) for the other."
        )


#: ``TANDEM_TF_EARLY_IMPORT=0``: TensorFlow is imported (in the zygote) when the first fit
#: starts, not as soon as ``tandem.train.tensorflow`` is imported.
#: the older name of ``tandem.jobs.early.EARLY_IMPORT_ENV`` (still read when that is unset)
EARLY_IMPORT_ENV = "TANDEM_TF_EARLY_IMPORT"

_KERAS_PRELOADS = ("tandem.train.tensorflow._preload_keras2", "tandem.train.tensorflow._preload")


def import_tensorflow_early(legacy_keras: bool | None = None) -> bool:
    """Begins importing TensorFlow, with the Keras a ``TensorflowConfig(legacy_keras)`` gang
    uses, in the process this program's workers will fork from (the zygote), without waiting
    for it and without importing TensorFlow here. Called when ``tandem.train.tensorflow`` is
    imported and when a ``TensorflowTrainer`` is built, so that the 5-20 s import runs while
    the program goes on (``tandem.init``, its data, ``fit``'s own set-up) instead of inside
    the first ``fit``. The policy (when it does nothing: in a worker, jobs going to a train
    server or Ray, ``TANDEM_EARLY_IMPORT=0`` or ``TANDEM_TF_EARLY_IMPORT=0``) is
    ``tandem.jobs.early.start_early``; a zygote started early for the other Keras is
    replaced, as TensorFlow binds its Keras at import."""
    from tandem.jobs.early import start_early

    preload = ("tandem.train._internal.worker", *TensorflowBackend(legacy_keras).preload)
    return start_early(preload, conflicts=[m for m in _KERAS_PRELOADS if m not in preload])


def tf_config(addresses: Sequence[str], index: int) -> str:
    """The ``TF_CONFIG`` JSON of worker ``index`` in a cluster of ``addresses`` (Ray's)."""
    return json.dumps({"cluster": {"worker": list(addresses)},
                       "task": {"type": "worker", "index": index}})
