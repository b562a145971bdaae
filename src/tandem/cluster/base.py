"""The ``Cluster`` interface: resources, gang placement and worker processes.

A ``Cluster`` knows machines and processes, nothing about jobs or training. The job
scheduler asks it to ``place`` a gang of resource bundles (all or nothing), then to
``start_workers`` on the placement; a ``WorkerProcess`` relays frames between the driver
and one worker process. ``LocalCluster`` runs processes on this machine; ``RayCluster``
runs them as Ray actors in a placement group.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any

from tandem._core.errors import ConfigError, ResourcesUnavailableError
from tandem._core.records import record

Bundle = Mapping[str, float]
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
STANDARD_RESOURCES = ("CPU", "GPU", "memory")


@record
class Placement:
    """Resources reserved for one gang: bundle ``i`` runs on ``node_ids[i]``.

    ``gpu_ids[i]`` lists the device indices bundle ``i`` may use (empty without GPUs).
    """

    placement_id: str
    bundles: tuple[dict[str, float], ...]
    node_ids: tuple[str, ...]
    node_ips: tuple[str, ...]
    gpu_ids: tuple[tuple[int, ...], ...]
    strategy: str = "PACK"
    handle: Any = field(default=None, compare=False, repr=False)


@record
class WorkerSpec:
    """How to start one worker process on bundle ``bundle_index`` of a placement."""

    worker_id: str
    bundle_index: int
    log_path: str
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    preload: tuple[str, ...] = ()
    objects: Mapping[str, Any] = field(default_factory=dict)
    """Values handed to the worker by the cluster's own transport, outside the task bytes
    (``channel.objects`` in the worker). Only clusters with ``supports_ray_objects`` take
    them: Ray handles (e.g. Ray Data iterators) travel as Ray actor-call arguments."""
    reuse_key: str | None = None
    """Set: once its task ended well, the process may run the next worker whose spec has the
    same key and resource shape (``TuneConfig(reuse_actors=True)``); clusters that cannot
    reuse processes ignore it. A key that starts with ``CLEAN_REUSE_PREFIX`` asks for reuse
    only where nobody can tell (see there)."""


CLEAN_REUSE_PREFIX = "clean:"
"""A ``WorkerSpec.reuse_key`` with this prefix: the process is reused only when its task
left nothing running behind it (no thread but tandem's, no ``multiprocessing`` child, no
CUDA context) and holds no framework with process-wide state (torch, TensorFlow, JAX: their
generators and settings cannot be put back as a fresh process has them), and it is put back as a fresh process would start (environment, working directory, ``sys.path``,
``sys.argv``, the user's modules dropped, ``random``/``numpy.random`` reseeded from the OS,
no ``TANDEM_REUSED_WORKER`` set): a tuner's function trainables run this way by default,
without ``reuse_actors``, so trial after trial runs without a process start."""


Sink = Callable[["WorkerProcess", Any], None]


class WorkerProcess(ABC):
    """The driver's handle on one worker process.

    Frames from the worker, and the synthetic events ``("__eof__",)`` (connection closed)
    and ``("__exit__", returncode)`` (process ended; negative = killed by that signal),
    are passed to ``sink(worker, frame)`` on the cluster's I/O thread, in order. The sink
    must be quick (put the frame on a queue).
    """

    worker_id: str
    node_id: str
    node_ip: str
    log_path: str

    @property
    @abstractmethod
    def pid(self) -> int | None:
        """The OS process id, once known."""

    @abstractmethod
    def send(self, obj: object) -> None:
        """Sends a frame to the worker (dropped if it is gone)."""

    @abstractmethod
    def kill(self) -> None:
        """Kills the worker and everything it started, at once. Idempotent."""


class Cluster(ABC):
    """Where workers run. Thread-safe: the scheduler and job controllers call it at once."""

    needs_polling: bool = False
    """True when capacity can change behind the job service's back (nodes join a Ray
    cluster): the service then retries pending jobs every ``poll_interval_s``."""
    poll_interval_s: float = 1.0
    supports_ray_objects: bool = False
    """True when ``WorkerSpec.objects`` reach the workers (Ray handles included)."""

    @abstractmethod
    def resources(self) -> dict[str, float]:
        """The cluster's total logical resources, e.g. ``{"CPU": 8, "GPU": 1, "memory": ...}``."""

    @abstractmethod
    def available(self) -> dict[str, float]:
        """What is not reserved by a placement right now."""

    @abstractmethod
    def place(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> Placement | None:
        """Reserves every bundle at once, or nothing (returns None) if the gang does not fit now."""

    @abstractmethod
    def release(self, placement: Placement) -> None:
        """Returns a placement's resources. Idempotent."""

    @abstractmethod
    def start_workers(
        self, placement: Placement, specs: Sequence[WorkerSpec], tasks: Sequence[bytes], sink: Sink
    ) -> list[WorkerProcess]:
        """Starts one process per spec; each receives its task (a cloudpickled callable)."""

    def placement_alive(self, placement: Placement) -> bool:
        """Whether a placement can still run workers. Called by a job after its workers
        failed; False (a node of it was lost) makes the job release it and wait for a new
        one. Machines that cannot vanish keep the default, True."""
        return True

    def prewarm(self, preload: Sequence[str] = ()) -> None:
        """Optional: get ready to start workers that import ``preload`` quickly."""

    def warming(self) -> bool:
        """Optional: whether what ``prewarm`` started is still under way."""
        return False

    def warm_pool_info(self) -> dict[str, object] | None:
        """Optional: the state and memory of the processes kept ready for workers (None:
        this cluster keeps none)."""
        return None

    def shutdown(self) -> None:
        """Optional: ends what the cluster started (helper processes); called once, when the
        job service that owns it shuts down."""

    def check_feasible(self, bundles: Sequence[Bundle], strategy: str = "PACK") -> None:
        """Raises ``ResourcesUnavailableError`` if the gang could never fit, even on an idle cluster."""
        total = self.resources()
        asked: dict[str, float] = {}
        for bundle in bundles:
            for key, amount in bundle.items():
                asked[key] = asked.get(key, 0.0) + amount
        for key, amount in asked.items():
            have = total.get(key, 0.0)
            if amount > have + 1e-9:
                known = ", ".join(f"{k}={_fmt(v)}" for k, v in total.items())
                raise ResourcesUnavailableError(
                    f"The job asks for {key}={_fmt(amount)} in all ({len(bundles)} worker(s)), "
                    f"but the cluster has {key}={_fmt(have)} and never more, so it could never "
                    f"start. The cluster has: {known}. Ask for fewer workers or less "
                    f"{key} per worker, or start tandem with more "
                    f"(tandem.init(num_cpus=..., num_gpus=..., resources={{...}}))."
                )
        self._check_bundle_shapes(bundles, strategy)

    def _check_bundle_shapes(self, bundles: Sequence[Bundle], strategy: str) -> None:
        """Subclasses refine: does each single bundle fit on some node?"""


def _fmt(x: float) -> str:
    if x >= 1 << 20 and float(x).is_integer():
        return f"{x / (1 << 30):.2f} GiB" if x >= 1 << 30 else f"{int(x)}"
    return f"{int(x)}" if float(x).is_integer() else f"{x:g}"


def validate_bundle(bundle: Mapping[str, object], what: str = "resources_per_worker") -> dict[str, float]:
    """Checks a resource bundle given by a user and returns it as floats.

    Raises:
        ConfigError: a negative, non-numeric or misspelled resource.
    """
    if not isinstance(bundle, Mapping):
        raise ConfigError(
            f"{what} must be a dict such as {{'CPU': 1, 'GPU': 0.5}}, got {bundle!r} "
            f"({type(bundle).__name__})."
        )
    out: dict[str, float] = {}
    for key, value in bundle.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"{what} has a resource name {key!r}; names are non-empty strings.")
        for std in STANDARD_RESOURCES:
            if key != std and key.lower() == std.lower():
                raise ConfigError(
                    f"{what} names the resource {key!r}; did you mean {std!r}? Resource "
                    f"names are case-sensitive: {', '.join(STANDARD_RESOURCES)} or custom "
                    f"names declared with tandem.init(resources=...)."
                )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise ConfigError(f"{what}[{key!r}] must be a number, got {value!r}.")
        if value < 0:
            raise ConfigError(
                f"{what}[{key!r}] is {value}, but resource amounts cannot be negative. "
                f"Use 0 or a positive amount."
            )
        if key == "GPU" and value > 1 and not float(value).is_integer():
            raise ConfigError(
                f"{what}['GPU'] is {value}: a worker may use a fraction of one GPU (<= 1) "
                f"or a whole number of GPUs, not {value}."
            )
        if value:
            out[key] = float(value)
    return out
