"""Giving each worker its shard of the trainer's ``datasets``.

In-memory data is split into equal per-rank shards here. A ``ray.data.Dataset`` is split by
Ray Data itself, as Ray Train's ``DataConfig.configure`` does (``streaming_split(n,
equal=True)`` for the datasets to split, ``Dataset.iterator()`` for the others, the
driver's ``DataContext`` execution options carried over), on every cluster:

- on the Ray cluster the iterators travel as Ray actor arguments;
- on the local cluster the driver runs a Ray instance for Ray Data (the one already
  running in this process, else a quiet local one it starts, and shuts down when the last
  run using it ends: ``LOCAL_RAY``); each iterator is pickled into a ``RayDataShard``, and a
  worker connects to that instance the first time it asks for the shard.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import threading
from collections.abc import Iterator, Mapping, Sequence
from types import ModuleType
from typing import Any

from tandem._core.errors import ConfigError
from tandem._core.extras import install_command
from tandem._core.records import record

SUPPORTED = (
    "a list/tuple/range (or another collections.abc.Sequence), a NumPy array, a pandas DataFrame or Series, a pyarrow Table, "
    "a torch Dataset (with __len__ and __getitem__), or a ray.data.Dataset"
)
RAY_INSTALL_HINT = install_command("ray")
_AUTH_ENV = "RAY_AUTH_MODE"

logger = logging.getLogger(__name__)


def is_ray_dataset(data: object) -> bool:
    return type(data).__module__.startswith("ray.data")


def split(name: str, data: Any, n: int) -> list[Any]:
    """``n`` contiguous shards of equal length (a remainder of < n rows is dropped, so every
    rank runs the same number of steps and DDP collectives never wait on a missing peer).
    A ``ray.data.Dataset`` is not split here: see ``ray_iterators``."""
    module = type(data).__module__
    try:
        length = len(data)
    except TypeError:
        raise ConfigError(
            f"datasets[{name!r}] is a {type(data).__name__}, which tandem cannot split by "
            f"rank. Give {SUPPORTED}."
        ) from None
    per = length // n
    bounds = [(r * per, (r + 1) * per) for r in range(n)]
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        return [data[a:b] for a, b in bounds]  # list, tuple, range, any sliceable Sequence
    if module.startswith("numpy"):
        return [data[a:b] for a, b in bounds]
    if module.startswith("pandas"):
        return [data.iloc[a:b] for a, b in bounds]
    if module.startswith("pyarrow"):
        return [data.slice(a, b - a) for a, b in bounds]
    if hasattr(data, "__getitem__") and any(
        c.__module__.startswith("torch.utils.data") for c in type(data).__mro__
    ):
        from torch.utils.data import Subset

        return [Subset(data, range(a, b)) for a, b in bounds]
    raise ConfigError(
        f"datasets[{name!r}] is a {type(data).__module__}.{type(data).__name__}, which tandem "
        f"cannot split by rank. Give {SUPPORTED}."
    )


def require_ray_data(what: str) -> ModuleType:
    """``ray`` with ``ray.data`` imported, or a ``ConfigError`` naming the extra."""
    try:
        import ray
        import ray.data
    except ImportError as e:
        raise ConfigError(
            f"{what} needs Ray Data, which cannot be imported here ({type(e).__name__}: {e}). "
            f"Install it with {RAY_INSTALL_HINT}, or give the data as a pandas DataFrame, "
            f"NumPy arrays or a torch Dataset instead."
        ) from e
    return ray


def ray_iterators(datasets: Mapping[str, Any], n: int, split_names: Sequence[str] | None,
                  progress_bars: bool = True) -> dict[str, list[Any]]:
    """Per dataset, one ``ray.data.DataIterator`` per rank, as Ray Train's
    ``DataConfig.configure``: a dataset to split is ``streaming_split(n, equal=True)``
    (disjoint shards of equal size that together hold every row, up to ``n - 1`` dropped),
    any other is ``ds.iterator()`` on every rank (each sees all of it). Needs a connected
    Ray driver (``LOCAL_RAY.acquire()`` on the local cluster). ``progress_bars=False``
    turns Ray Data's progress bars off for these reads (the quiet local instance)."""
    if not datasets:
        return {}
    require_ray_data("a ray.data.Dataset in the trainer's datasets")
    from ray.data import Dataset, ExecutionOptions
    from ray.data.context import DataContext

    current = DataContext.get_current().execution_options
    out: dict[str, list[Any]] = {}
    for name, ds in datasets.items():
        if getattr(ds, "name", "") is None and hasattr(ds, "set_name"):
            ds.set_name(name)
        if isinstance(ds, Dataset):
            ds = Dataset.copy(ds)
            ds.context.execution_options = ExecutionOptions(
                resource_limits=current.resource_limits,
                exclude_resources=current.exclude_resources,
                preserve_order=current.preserve_order,
                verbose_progress=current.verbose_progress,
            )
            if not progress_bars:
                ds.context.enable_progress_bars = False
        if split_names is None or name in split_names:
            out[name] = list(ds.streaming_split(n, equal=True))
        else:
            out[name] = [ds.iterator() for _ in range(n)]
    return out


@contextlib.contextmanager
def _quiet_ray() -> Iterator[dict[str, Any]]:
    """Ray's start-up messages (token auth, "Started a local Ray instance", ...) are not the
    user's business when tandem starts Ray only to read a dataset; errors still show. Yields
    the ``ray.init`` arguments that say so; the "ray" logger's level is put back after."""
    log = logging.getLogger("ray")
    level = log.level
    try:
        yield {"configure_logging": True, "logging_level": logging.ERROR,
               "log_to_driver": False}
    finally:
        log.setLevel(level)


@record
class RayEndpoint:
    """Where the driver's Ray instance is, for workers to connect to it."""

    address: str
    auth_mode: str | None


class LocalRay:
    """The driver's Ray instance for Ray Data on a cluster that is not Ray.

    ``acquire()`` returns the Ray instance this process is connected to; when there is none,
    it starts a local one (no dashboard, no log streaming, start-up warnings hidden).
    ``release()`` is called once per ``acquire()``; the instance tandem started is shut
    down when the last run holding it releases it (one the user started is left alone).
    Thread-safe: concurrent runs (trials) share one instance.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._users = 0
        self._started = False
        self._saved_auth: str | None = None

    def acquire(self) -> RayEndpoint:
        ray = require_ray_data("a ray.data.Dataset given to a trainer")
        with self._lock:
            if not ray.is_initialized():
                self._saved_auth = os.environ.get(_AUTH_ENV)
                with _quiet_ray() as quiet:
                    ray.init(include_dashboard=False, **quiet)
                self._started = True
                logger.info("started a local Ray instance for Ray Data at %s",
                            ray.get_runtime_context().gcs_address)
            self._users += 1
            return RayEndpoint(address=ray.get_runtime_context().gcs_address,
                               auth_mode=os.environ.get(_AUTH_ENV))

    def release(self) -> None:
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users or not self._started:
                return
            import ray

            self._started = False
            ray.shutdown()
            # ray.init sets RAY_AUTH_MODE for this process; put back what the user had
            if self._saved_auth is None:
                os.environ.pop(_AUTH_ENV, None)
            else:
                os.environ[_AUTH_ENV] = self._saved_auth

    @property
    def users(self) -> int:
        return self._users


LOCAL_RAY = LocalRay()


@record
class RayDataShard:
    """One worker's ``ray.data.DataIterator``, pickled in the driver (it holds Ray actor
    handles, which only a process connected to the same Ray instance can unpickle)."""

    name: str
    payload: bytes
    endpoint: RayEndpoint

    @classmethod
    def pack(cls, name: str, iterator: object, endpoint: RayEndpoint) -> RayDataShard:
        import ray.cloudpickle

        return cls(name=name, payload=ray.cloudpickle.dumps(iterator), endpoint=endpoint)

    def resolve(self) -> Any:
        """In the worker: connects to the driver's Ray instance (once per process) and
        returns the iterator."""
        ray = require_ray_data(f"train.get_dataset_shard({self.name!r}) (a ray.data.Dataset)")
        if not ray.is_initialized():
            if self.endpoint.auth_mode is not None:
                os.environ.setdefault(_AUTH_ENV, self.endpoint.auth_mode)
            with _quiet_ray() as quiet:
                ray.init(address=self.endpoint.address, **quiet)
        return pickle.loads(self.payload)
