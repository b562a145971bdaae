"""The ``Backend`` interface: set up and tear down a gang's communication library."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tandem.train.context import TrainContext


class BackendConfig:
    """User-facing backend settings; ``backend_cls`` (Ray's name) is the ``Backend`` class
    that ``backend()`` builds."""

    @property
    def backend_cls(self) -> type[Backend]:
        return Backend

    def backend(self) -> Backend:
        backend = self.backend_cls()
        backend.backend_config = self
        return backend


class Backend:
    """Hooks around a worker gang. The default does nothing (plain ``DataParallelTrainer``).

    ``worker_env`` runs in the driver once per gang start and returns each rank's extra
    environment; ``on_worker_start``/``on_worker_shutdown`` run in each worker around the
    train function. A Backend object is pickled to the workers: keep it small.
    """

    preload: tuple[str, ...] = ()
    """Modules worth importing once in the process workers are forked from."""

    share_cuda_visible_devices: bool = False
    backend_config: Any = None
    """The ``BackendConfig`` that built this backend (passed to Ray's hooks)."""

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{} for _ in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        """Called in each worker before the train function."""

    def on_worker_shutdown(self, context: TrainContext) -> None:
        """Called in each worker after the train function, even if it raised."""

    # -- Ray's hooks ---------------------------------------------------------------------
    # Ray calls them once in the driver with a group of the workers; tandem calls them in
    # every worker, with a group whose ``execute(fn, *args)`` runs ``fn`` in this worker and
    # returns every worker's result (by rank), so ``worker_group.execute(...)`` in a hook
    # runs ``fn`` once per worker, as in Ray.
    def on_start(self, worker_group: Any, backend_config: Any) -> None:
        """Ray's hook: after the workers start, before the train function."""

    def on_training_start(self, worker_group: Any, backend_config: Any) -> None:
        """Ray's hook: right before the train function (the session is available)."""

    def on_shutdown(self, worker_group: Any, backend_config: Any) -> None:
        """Ray's hook: after the train function ended (even if it raised)."""
