"""Which GPUs Ray gave each GPU bundle of a placement group.

Ray fixes a bundle's device instances when it reserves the group; a short task that takes
the bundle's GPUs reads the ``CUDA_VISIBLE_DEVICES`` Ray set for it. The worker actors
themselves ask Ray for no GPUs (they are pinned to their node and outlive the group), so
the driver passes each worker its bundle's devices.
"""

from __future__ import annotations

import os
from typing import Any

from tandem.cluster.base import Placement
from tandem.cluster.ray._connect import import_ray
from tandem.cluster.ray._placement import PGHandle

PROBE_TIMEOUT_S = 60


def visible_devices() -> str:
    """Runs as a Ray task inside a GPU bundle: the devices Ray gave it."""
    return os.environ.get("CUDA_VISIBLE_DEVICES", "")


class GpuProbe:
    """Learns and caches (on the placement's ``PGHandle``) each bundle's devices."""

    def __init__(self) -> None:
        self._remote: Any = None  # the remote function, defined once per Ray connection

    def reset(self) -> None:
        """Forget the remote function (after disconnecting from Ray)."""
        self._remote = None

    def learn(self, placement: Placement) -> None:
        """Sets ``placement.handle.devices``: one ``CUDA_VISIBLE_DEVICES`` per bundle
        (``""`` for bundles without GPUs). Runs the probe only for GPU bundles, once."""
        handle: PGHandle | None = placement.handle
        if handle is None or handle.devices is not None:
            return
        if not any(b.get("GPU") for b in placement.bundles):
            handle.devices = ()
            return
        ray = import_ray()
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if self._remote is None:
            self._remote = ray.remote(visible_devices)
        probe = self._remote
        refs = {
            i: probe.options(
                num_cpus=0, num_gpus=b["GPU"],
                scheduling_strategy=PlacementGroupSchedulingStrategy(
                    handle.pg, placement_group_bundle_index=handle.order[i]),
            ).remote()
            for i, b in enumerate(placement.bundles) if b.get("GPU")
        }
        found = dict(zip(refs, ray.get(list(refs.values()), timeout=PROBE_TIMEOUT_S)))
        handle.devices = tuple(found.get(i, "") for i in range(len(placement.bundles)))
