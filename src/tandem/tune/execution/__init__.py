"""Ray's ``ray.tune.execution`` names a user touches: :class:`PlacementGroupFactory`."""

from __future__ import annotations

from tandem.tune.execution.placement_groups import PlacementGroupFactory

__all__ = ["PlacementGroupFactory"]
