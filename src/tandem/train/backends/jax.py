"""The JAX backend: ``jax.distributed.initialize`` in every worker, rank 0 the coordinator.

Rank 0 picks a free port on its node and hands ``host:port`` to the other ranks through the
driver's rendezvous; each rank then calls ``jax.distributed.initialize(address,
num_processes=world_size, process_id=rank)`` before the train function runs, so
``jax.devices()`` lists every worker's devices and collectives (``psum`` under ``pmap`` /
``shard_map``, ``multihost_utils``) cross processes (gloo on CPU).

Unlike Ray 2.60, which sets up ``jax.distributed`` only for TPUs and GPUs, this runs on CPU
too: a CPU gang is one JAX program, not ``num_workers`` unrelated ones.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from tandem._core.errors import ConfigError
from tandem._core.extras import install_command
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    from tandem.train.context import TrainContext

INSTALL_HINT = install_command("jax")


def require_jax(what: str) -> None:
    """Raises ``ModuleNotFoundError`` naming the extra when JAX is not installed (checked
    without importing it)."""
    if importlib.util.find_spec("jax") is None:
        raise ModuleNotFoundError(
            f"{what} needs JAX, which is not installed. Install tandem's 'jax' extra: "
            f"{INSTALL_HINT}"
        )


class JaxConfig(BackendConfig):
    """Ray's ``JaxConfig``.

    Args:
        use_tpu: TPUs do not exist on a tandem cluster; True raises.
        use_gpu: run JAX on CUDA (``JAX_PLATFORMS=cuda``) instead of the CPU.
    """

    def __init__(self, use_tpu: bool = False, use_gpu: bool = False) -> None:
        if use_tpu:
            raise ConfigError(
                "JaxConfig(use_tpu=True): tandem clusters have no TPUs (tandem schedules CPU "
                "and CUDA GPU workers). Use JaxConfig(use_gpu=True) on GPU workers, or the "
                "default JaxConfig() for CPU."
            )
        self.use_tpu = bool(use_tpu)
        self.use_gpu = bool(use_gpu)

    def to_dict(self) -> dict[str, bool]:
        return {"use_tpu": self.use_tpu, "use_gpu": self.use_gpu}

    def backend(self) -> Backend:
        require_jax("JaxConfig")
        return JaxBackend(self.use_gpu)

    def __repr__(self) -> str:
        return f"JaxConfig(use_tpu={self.use_tpu}, use_gpu={self.use_gpu})"


class JaxBackend(Backend):
    """Joins every worker of the gang into one ``jax.distributed`` program."""

    def __init__(self, use_gpu: bool = False, timeout_s: int = 300) -> None:
        self.use_gpu = use_gpu
        self.timeout_s = timeout_s
        self._initialized = False

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{"TANDEM_GBDT_NODE_IP": ip} for ip in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        from tandem.train._internal.gbdt import free_port, node_ip
        from tandem.train.session import get_session

        if not os.environ.get("JAX_PLATFORMS"):
            os.environ["JAX_PLATFORMS"] = "cuda" if self.use_gpu else "cpu"
        session = get_session()
        if context.world_size == 1 or session is None:
            return
        if context.world_rank == 0:
            host = node_ip()
            address = f"{host}:{free_port(host)}"
            session.call("rendezvous_set", address)
        else:
            address = session.call("rendezvous_get", None, timeout_s=self.timeout_s)
        import jax

        jax.distributed.initialize(address, num_processes=context.world_size,
                                   process_id=context.world_rank,
                                   initialization_timeout=self.timeout_s)
        self._initialized = True

    def on_worker_shutdown(self, context: TrainContext) -> None:
        if self._initialized:
            import jax

            self._initialized = False
            jax.distributed.shutdown()
