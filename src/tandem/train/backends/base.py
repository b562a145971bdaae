"""The ``Backend`` interface: set up and tear down a gang's communication library."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tandem.train.context import TrainContext


class BackendConfig:
    """User-facing backend settings; ``backend_cls`` builds the ``Backend``."""

    def backend(self) -> Backend:
        return Backend()


class Backend:
    """Hooks around a worker gang. The default does nothing (plain ``DataParallelTrainer``).

    ``worker_env`` runs in the driver once per gang start and returns each rank's extra
    environment; ``on_worker_start``/``on_worker_shutdown`` run in each worker around the
    train function. A Backend object is pickled to the workers: keep it small.
    """

    preload: tuple[str, ...] = ()
    """Modules worth importing once in the process workers are forked from."""

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{} for _ in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        """Called in each worker before the train function."""

    def on_worker_shutdown(self, context: TrainContext) -> None:
        """Called in each worker after the train function, even if it raised."""
