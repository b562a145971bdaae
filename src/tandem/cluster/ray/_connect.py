"""Importing Ray and connecting to a Ray cluster (or reusing this process's connection)."""

from __future__ import annotations

import logging
import socket
from types import ModuleType
from typing import Any

from tandem._core.errors import ConfigError
from tandem._core.extras import import_optional

logger = logging.getLogger(__name__)


def import_ray() -> ModuleType:
    """The ``ray`` module, or an error with the install hint."""
    return import_optional("ray", "ray", "The Ray backend")


def connect(address: str | None, namespace: str | None) -> bool:
    """Connects this process to the Ray cluster at ``address`` unless it is connected
    already (then warns if ``address`` names another cluster). Returns whether this call
    made the connection (and so owns it).

    Raises:
        ConfigError: no Ray cluster answers at ``address``.
    """
    ray = import_ray()
    if ray.is_initialized():
        warn_if_other_cluster(ray, address)
        return False
    try:
        ray.init(address=address or "auto", namespace=namespace, log_to_driver=False,
                 logging_level=logging.WARNING)
    except ConnectionError as e:
        raise ConfigError(
            f"tandem could not connect to a Ray cluster at ray_address={address!r}: "
            f"{e}. Start one first (`ray start --head`, the Ray cluster launcher or "
            f"KubeRay) and pass its address, e.g. 'auto' on a node of the cluster or "
            f"'HEAD_IP:6379'."
        ) from e
    return True


def warn_if_other_cluster(ray: Any, address: str | None) -> None:
    """This process is already connected to Ray: say so if ``address`` names another one."""
    if not address or address == "auto" or address.startswith("ray://"):
        return
    try:
        current = ray.get_runtime_context().gcs_address
    except Exception:  # noqa: BLE001 - an older or client-mode connection: nothing to compare
        return
    if not current or same_endpoint(ray, current, address):
        return
    logger.warning(
        "tandem uses this process's Ray connection (cluster at %s), not "
        "ray_address=%r: a process talks to one Ray cluster. To use %s, call "
        "ray.shutdown() first or run the script in a fresh process.",
        current, address, address)


def same_endpoint(ray: Any, a: str, b: str) -> bool:
    """Whether two ``host:port`` addresses name the same server (names resolved; loopback
    counts as this node's address)."""
    def norm(addr: str) -> tuple[str, str]:
        host, _, port = addr.rpartition(":")
        try:
            ip = socket.gethostbyname(host.strip("[]"))
        except OSError:
            ip = host
        if ip.startswith("127.") or ip in ("0.0.0.0", "::1", "localhost"):
            ip = ray.util.get_node_ip_address()
        return ip, port

    return norm(a) == norm(b)
