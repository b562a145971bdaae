"""Placement groups: Ray's resource view, bundle shapes, rank order by node, liveness.

Pure helpers (``ray_bundle``, ``group_by_node``, ``check_bundle_shapes``) are tested
without Ray; the rest call Ray's placement-group API.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

from tandem._core.errors import ResourcesUnavailableError
from tandem.cluster.base import STANDARD_RESOURCES, Bundle, _fmt

_HIDDEN_PREFIXES = ("node:", "bundle_group_", "object_store_memory")


def visible(resources: dict[str, float]) -> dict[str, float]:
    """Ray's resource view without its internal node/bundle bookkeeping resources."""
    return {k: float(v) for k, v in resources.items() if not k.startswith(_HIDDEN_PREFIXES)}


class PGHandle:
    """What ``Placement.handle`` holds: the placement group, rank -> bundle index order, and
    each slot's ``CUDA_VISIBLE_DEVICES`` (learnt when its workers first start)."""

    __slots__ = ("devices", "order", "pg")

    def __init__(self, pg: Any, order: tuple[int, ...]) -> None:
        self.pg = pg
        self.order = order
        self.devices: tuple[str, ...] | None = None


def ray_bundle(bundle: Bundle) -> dict[str, float]:
    """A bundle as Ray takes it: no zero amounts, never empty."""
    out = {k: float(v) for k, v in bundle.items() if v}
    return out or {"CPU": 0.01}  # Ray refuses empty bundles


def group_by_node(node_of: list[str], bundles: Sequence[Bundle]) -> tuple[int, ...]:
    """Rank order over bundle indices: ranks on one node are contiguous, nodes in order of
    their first bundle. Only identical bundles are reordered (a rank keeps its shape)."""
    if any(dict(b) != dict(bundles[0]) for b in bundles):
        return tuple(range(len(bundles)))
    first: dict[str, int] = {}
    for i, n in enumerate(node_of):
        first.setdefault(n, i)
    return tuple(sorted(range(len(node_of)), key=lambda i: (first[node_of[i]], i)))


def total(bundles: Sequence[Bundle]) -> dict[str, float]:
    need: dict[str, float] = {}
    for b in bundles:
        for k, v in b.items():
            need[k] = need.get(k, 0.0) + v
    return need


def check_bundle_shapes(nodes: list[dict[str, float]], bundles: Sequence[Bundle],
                        strategy: str) -> None:
    """Raises ``ResourcesUnavailableError`` when the gang could never be placed on these
    nodes (each a resource dict), whatever else runs: a bundle no node can hold, or a
    strict strategy the nodes cannot satisfy."""

    def fits(bundle: Bundle, node: dict[str, float]) -> bool:
        return all(node.get(k, 0.0) + 1e-9 >= v for k, v in bundle.items())

    def show(node: dict[str, float]) -> str:
        return ", ".join(f"{k}={_fmt(v)}" for k, v in node.items()
                         if k in STANDARD_RESOURCES or not k.startswith("accelerator"))

    for b in bundles:
        if not any(fits(b, n) for n in nodes):
            shape = ", ".join(f"{k}={_fmt(v)}" for k, v in b.items())
            largest = "; ".join(show(n) for n in nodes) or "no alive node"
            raise ResourcesUnavailableError(
                f"A worker asks for {{{shape}}}, but no single node of the Ray cluster has "
                f"that much (a worker runs on one node). Nodes: {largest}. Ask for less "
                f"per worker (ScalingConfig(resources_per_worker=...)), or add bigger "
                f"nodes; on an autoscaling cluster use RayCluster(autoscaling=True)."
            )
    if strategy == "STRICT_SPREAD" and len(bundles) > 1:
        usable = sum(1 for n in nodes if fits(bundles[0], n))
        if usable < len(bundles):
            raise ResourcesUnavailableError(
                f"placement_strategy='STRICT_SPREAD' puts each of the {len(bundles)} "
                f"workers on its own node, but only {usable} node(s) of the Ray cluster "
                f"can hold one. Use 'SPREAD' or 'PACK', or fewer workers."
            )
    if strategy == "STRICT_PACK":
        need = total(bundles)
        if not any(fits(need, n) for n in nodes):
            raise ResourcesUnavailableError(
                f"placement_strategy='STRICT_PACK' puts all {len(bundles)} workers on one "
                f"node, but no node of the Ray cluster has "
                f"{', '.join(f'{k}={_fmt(v)}' for k, v in need.items())}. Use 'PACK' to "
                f"let the gang span nodes."
            )


def remove_pg(pg: object) -> None:
    """Removes a placement group; one already gone (or Ray gone) is fine."""
    from ray.util.placement_group import remove_placement_group

    try:
        remove_placement_group(pg)
    except Exception:  # noqa: BLE001, S110 - already removed, or Ray is gone
        pass


def reachable(host: str, port: Any, timeout_s: float = 1.0) -> bool:
    """Whether a node's raylet accepts connections (no port known: assume so)."""
    if not port:
        return True
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True
    except OSError:
        return False
