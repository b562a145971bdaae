"""The torch backend: one ``torch.distributed`` process group per gang (gloo on CPU, nccl on GPU)."""

from __future__ import annotations

import datetime
import logging
import os
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    from tandem.train.context import TrainContext

logger = logging.getLogger(__name__)

_BACKENDS = ("gloo", "nccl", "mpi", "ucc", "xccl")


class TorchConfig(BackendConfig):
    """Args:
        backend: ``"gloo"``, ``"nccl"``, ...; default nccl when the worker has a GPU, else gloo.
        init_method: Ray's ``"env"`` (default) or ``"tcp"``: how ranks find rank 0. Both
            give the same process group here: ranks meet through a TCPStore whose port rank
            0 picks, and ``MASTER_ADDR``/``MASTER_PORT`` are set as with ``"env"``.
        timeout_s: how long collectives wait for a peer before failing.
    """

    def __init__(self, backend: str | None = None, init_method: str = "env", timeout_s: int = 1800):
        if init_method not in ("env", "tcp"):
            raise ConfigError(
                f"TorchConfig(init_method={init_method!r}) is not supported: use 'env' (the "
                f"default) or 'tcp', as in Ray."
            )
        if backend is not None and backend not in _BACKENDS:
            raise ConfigError(
                f"TorchConfig(backend={backend!r}) is not a torch.distributed backend; use one "
                f"of {', '.join(_BACKENDS)}, or None to pick nccl on GPU and gloo on CPU."
            )
        self.backend_name = backend
        self.init_method = init_method
        self.timeout_s = timeout_s

    def backend(self) -> Backend:
        return TorchBackend(self.backend_name, self.timeout_s)

    def __repr__(self) -> str:
        return f"TorchConfig(backend={self.backend_name!r})"


class TorchBackend(Backend):
    """Sets up the gang's process group.

    Joining it survives a slow or briefly unreachable peer: an attempt that fails for a
    network reason on any rank ("Gloo connectFullMesh failed ... Connection closed by
    peer" on a loaded machine) is torn down on every rank and made again by the whole gang
    after a pause that doubles each time (``join_backoff_s`` up to ``join_max_backoff_s``),
    for at most ``join_deadline_s`` seconds, before it counts as a failure of the run.
    """

    preload = ("torch", "torch.distributed", "torch.nn.parallel")
    join_deadline_s = 300.0
    join_backoff_s = 0.25
    join_max_backoff_s = 8.0

    def __init__(self, backend: str | None = None, timeout_s: int = 1800) -> None:
        self.backend_name = backend
        self.timeout_s = timeout_s

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        master = node_ips[0]
        port = "0"  # rank 0 binds the store on a free port; see _rendezvous_store
        world = str(len(node_ips))
        local_counts: dict[str, int] = {}
        envs: list[dict[str, str]] = []
        for rank, ip in enumerate(node_ips):
            local = local_counts.get(ip, 0)
            local_counts[ip] = local + 1
            envs.append({
                "MASTER_ADDR": master, "MASTER_PORT": port, "RANK": str(rank),
                "WORLD_SIZE": world, "LOCAL_RANK": str(local),
            })
        for env, ip in zip(envs, node_ips):
            env["LOCAL_WORLD_SIZE"] = str(local_counts[ip])
        out: list[Mapping[str, str]] = [*envs]
        return out

    def on_worker_start(self, context: TrainContext) -> None:
        import torch

        threads = int(os.environ.get("TANDEM_NUM_THREADS", "0") or 0)
        if threads:
            torch.set_num_threads(threads)
        use_cuda = bool(os.environ.get("CUDA_VISIBLE_DEVICES")) and torch.cuda.is_available()
        if use_cuda:
            torch.cuda.set_device(_local_device_index(context))
        backend = self.backend_name or ("nccl" if use_cuda else "gloo")
        timeout = datetime.timedelta(seconds=self.timeout_s)
        store = _rendezvous_store(context, timeout)
        if use_cuda and self.backend_name is None and context.world_size > 1:
            shared = _ranks_sharing_a_device(store, context)
            if shared:
                backend = "gloo"
                if context.world_rank == 0:
                    logger.warning(
                        "ranks %s share one GPU (fractional GPUs per worker): nccl refuses two "
                        "ranks on one device, so this gang's process group uses gloo. Give "
                        "each worker a whole GPU for nccl, or name the backend with "
                        "TorchConfig(backend=...).", shared)
        self._join(backend, store, context, timeout)

    def _join(self, backend: str, store: Any, context: TrainContext,
              timeout: datetime.timedelta) -> None:
        """Joins the process group, retried by the whole gang while a rank fails for a
        network reason (see the class docstring). Each attempt uses its own key prefix in
        the gang's store, so what a failed attempt left there cannot confuse the next."""
        import torch.distributed as dist

        from tandem.train._internal.rendezvous import Outcome, RendezvousVote
        from tandem.train.session import get_session

        session = get_session()
        start = time.monotonic()
        pause = self.join_backoff_s
        attempt = 0
        while True:
            error: BaseException | None = None
            outcome: Outcome
            try:
                dist.init_process_group(
                    backend=backend, store=dist.PrefixStore(f"tandem/join{attempt}", store),
                    rank=context.world_rank, world_size=context.world_size, timeout=timeout,
                )
                outcome = "ok"
            except Exception as e:  # noqa: BLE001 - classified, then re-raised or retried
                error = e
                outcome = "retry" if _is_transient(e) else "fatal"
            if session is None:  # no driver to agree with (torchrun-style use): one try
                if error is not None:
                    raise error
                return
            outcomes = session.call(
                "rendezvous_vote",
                RendezvousVote(attempt, context.world_rank, context.world_size, outcome),
                timeout_s=timeout.total_seconds(),
            )
            failed = {r: o for r, o in outcomes.items() if o != "ok"}
            if not failed:
                return
            if outcome == "ok":
                dist.destroy_process_group()  # formed here, not everywhere: form it again
            elapsed = time.monotonic() - start
            if "fatal" in failed.values() or elapsed + pause > self.join_deadline_s:
                if error is not None:
                    raise error
                raise RuntimeError(
                    f"rank(s) {sorted(failed)} of the gang could not join the torch process "
                    f"group ({attempt + 1} attempt(s) in {elapsed:.1f} s); "
                    f"their logs say why."
                )
            logger.warning(
                "rank %d: joining the torch process group failed on rank(s) %s (attempt %d%s); "
                "the gang tries again in %.2f s", context.world_rank, sorted(failed),
                attempt + 1, f": {type(error).__name__}: {error}" if error else "", pause)
            time.sleep(pause)
            pause = min(pause * 2, self.join_max_backoff_s)
            attempt += 1

    def on_worker_shutdown(self, context: TrainContext) -> None:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()


_TRANSIENT_WORDS = ("connectfullmesh", "connection closed", "connection reset",
                    "connection refused", "broken pipe", "timed out", "timeout", "socket")


def _is_transient(e: BaseException) -> bool:
    """Whether a failed join is worth retrying: network trouble, not a wrong setting."""
    import torch.distributed as dist

    if isinstance(e, (dist.DistNetworkError, dist.DistStoreError)):
        return True
    if isinstance(e, RuntimeError):
        text = str(e).lower()
        return any(w in text for w in _TRANSIENT_WORDS)
    return isinstance(e, (ConnectionError, TimeoutError))


def _rendezvous_store(context: TrainContext, timeout: datetime.timedelta) -> object:
    """The gang's TCPStore. Rank 0 binds it on a port the OS picks (no port can be taken
    between choosing and binding it) and the others learn the port through the driver."""
    from torch.distributed import TCPStore

    from tandem.train.session import get_session

    session = get_session()
    addr = os.environ["MASTER_ADDR"]
    if session is None:  # not under a tandem worker: use the environment as torchrun does
        return TCPStore(addr, int(os.environ["MASTER_PORT"]), context.world_size,
                        context.world_rank == 0, timeout)
    if context.world_rank == 0:
        store = TCPStore(addr, 0, context.world_size, True, timeout, wait_for_workers=False)
        port = store.port
        session.call("rendezvous_set", port)
    else:
        port = session.call("rendezvous_get", None, timeout_s=timeout.total_seconds())
        store = TCPStore(addr, port, context.world_size, False, timeout)
    os.environ["MASTER_PORT"] = str(port)  # for libraries that read it
    return store


def _ranks_sharing_a_device(store: Any, context: TrainContext) -> list[int]:
    """The ranks whose GPU another rank also holds (gang workers given fractions of one
    GPU), found through the gang's store: each rank publishes its device's UUID and reads
    everyone's, so every rank comes to the same answer. nccl fails on such a gang
    ("Duplicate GPU detected"), as it does on Ray; tandem picks gloo instead."""
    import torch

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    mine = str(getattr(props, "uuid", "")) or (
        f"{os.uname().nodename}:{getattr(props, 'pci_bus_id', '')}:{props.name}")
    store.set(f"tandem/gpu/{context.world_rank}", mine)
    devices = [store.get(f"tandem/gpu/{r}").decode() for r in range(context.world_size)]
    return [r for r, d in enumerate(devices) if devices.count(d) > 1]


def _local_device_index(context: TrainContext) -> int:
    """Each worker sees only its own GPUs (CUDA_VISIBLE_DEVICES), so its device is index 0
    unless several GPUs were given to it, or the devices are shared (Ray) by local rank."""
    import torch

    n = torch.cuda.device_count()
    return context.local_rank if n > 1 and n >= context.local_world_size and os.environ.get(
        "TANDEM_SHARED_GPUS") else 0


def import_torch_early() -> bool:
    """Begins importing torch (and the workers' own modules) in the process this program's
    workers will fork from (the zygote), without importing torch here: called when
    ``tandem.train.torch`` is imported and when a ``TorchTrainer`` is built, so the import
    (1-3 s) runs while the program goes on with its imports, data and set-up instead of
    inside the first ``fit``. The policy (nothing in a worker, when jobs go to a train
    server or Ray, or with ``TANDEM_EARLY_IMPORT=0``) is ``tandem.jobs.early.start_early``."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    from tandem.jobs.early import start_early

    return start_early(("tandem.train._internal.worker", *TorchBackend.preload))
