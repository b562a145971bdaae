"""``PlacementGroupFactory``: a trial's resources as bundles, as in Ray Tune.

A trial of a function trainable or ``Trainable`` class runs as one worker process that
holds the sum of the factory's bundles (``required_resources``): what Ray reserves for the
trial's placement group (head bundle for the trainable, the others for what it starts).
tandem starts no Ray placement groups, so ``to_placement_group()`` raises, saying what to
use instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from copy import deepcopy
from typing import Any, NoReturn

from tandem._core.errors import ConfigError

__all__ = ["PlacementGroupFactory", "as_placement_group_factory", "resource_dict_to_pg_factory"]

_STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
# the keyword arguments of Ray's placement_group() after bundles and strategy
_PG_KWARGS = ("name", "lifetime", "_soft_target_node_id", "bundle_label_selector")


def _sum_bundles(bundles: Sequence[Mapping[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for bundle in bundles:
        for key, value in bundle.items():
            out[key] = out.get(key, 0) + value
    return out


class PlacementGroupFactory:
    """A trial's resource request: a list of bundles and a placement strategy (Ray's).

    Args:
        bundles: Dicts of resource name to amount, e.g. ``[{"CPU": 1}, {"CPU": 2}]``. The
            first (head) bundle may be empty when only the others need resources.
        strategy: ``"PACK"``, ``"SPREAD"``, ``"STRICT_PACK"`` or ``"STRICT_SPREAD"``.
        *args, **kwargs: The further arguments of Ray's ``placement_group()`` (``name``,
            ``lifetime``, ...); kept for equality, as in Ray.
    """

    def __init__(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK",
                 *args: object, **kwargs: object) -> None:
        if not bundles:
            raise ValueError("Cannot initialize a ResourceRequest with zero bundles.")
        if isinstance(bundles, Mapping) or not all(isinstance(b, Mapping) for b in bundles):
            raise ConfigError(
                f"PlacementGroupFactory(bundles={bundles!r}): bundles must be a list of dicts "
                "of resource name to amount, e.g. [{'CPU': 1}, {'CPU': 2}]."
            )
        for bundle in bundles:
            for key, value in bundle.items():
                if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                    raise ConfigError(
                        f"PlacementGroupFactory: bundle {dict(bundle)!r} asks for {value!r} of "
                        f"{key!r}; amounts must be numbers >= 0."
                    )
        if strategy not in _STRATEGIES:
            raise ConfigError(
                f"PlacementGroupFactory(strategy={strategy!r}): the strategy must be one of "
                f"{', '.join(_STRATEGIES)}."
            )
        if len(args) > len(_PG_KWARGS) or any(k not in _PG_KWARGS for k in kwargs):
            raise RuntimeError(
                "Invalid definition for resource request. Please check that you passed "
                "valid arguments to the ResourceRequest object."
            )
        self._bundles = [{k: float(v) for k, v in b.items() if v != 0} for b in bundles]
        if not self._bundles[0]:
            self._head_bundle_is_empty = True
            self._bundles.pop(0)
            if not self._bundles:
                raise ValueError(
                    "Cannot initialize a ResourceRequest with an empty head and zero worker "
                    "bundles."
                )
        else:
            self._head_bundle_is_empty = False
        self._strategy = strategy
        self._args = args
        self._kwargs = kwargs

    @property
    def head_bundle_is_empty(self) -> bool:
        """True if the head bundle is empty while the other bundles need resources."""
        return self._head_bundle_is_empty

    @property
    def head_cpus(self) -> float:
        """The CPUs of the head bundle."""
        return 0.0 if self._head_bundle_is_empty else self._bundles[0].get("CPU", 0.0)

    @property
    def bundles(self) -> list[dict[str, float]]:
        """A deep copy of the bundles (the empty head bundle left out)."""
        return deepcopy(self._bundles)

    @property
    def required_resources(self) -> dict[str, float]:
        """The sums of all bundles' resources: what the trial's worker holds."""
        return _sum_bundles(self._bundles)

    @property
    def strategy(self) -> str:
        return self._strategy

    def _key(self) -> tuple[object, ...]:
        return (json.dumps(self._bundles, sort_keys=True), self._strategy, self._args,
                json.dumps(self._kwargs, sort_keys=True, default=repr),
                self._head_bundle_is_empty)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PlacementGroupFactory) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"PlacementGroupFactory(bundles={self._bundles!r}, strategy={self._strategy!r}, "
                f"head_bundle_is_empty={self._head_bundle_is_empty})")

    def to_placement_group(self) -> NoReturn:
        raise NotImplementedError(
            "PlacementGroupFactory.to_placement_group(): tandem creates no Ray placement "
            "groups; give the factory to tune.with_resources(trainable, factory) and each "
            "trial's worker holds its required_resources."
        )

    def __call__(self, *args: object, **kwargs: object) -> NoReturn:
        self.to_placement_group()


def resource_dict_to_pg_factory(spec: Mapping[str, Any] | None = None) -> PlacementGroupFactory:
    """A resources dict (``{"cpu": 2, "gpu": 1, ...}``) as a one-bundle factory (Ray's)."""
    spec = dict(spec or {"cpu": 1})
    cpus = spec.pop("cpu", spec.pop("CPU", 0.0))
    gpus = spec.pop("gpu", spec.pop("GPU", 0.0))
    memory = spec.pop("memory", 0.0)
    bundle = dict(spec.pop("custom_resources", {})) or spec
    bundle.update({"CPU": cpus, "GPU": gpus, "memory": memory})
    return PlacementGroupFactory([bundle])


def as_placement_group_factory(resources: object) -> PlacementGroupFactory:
    """A trial's resources (None, a dict, a factory or a ``ScalingConfig``) as a factory;
    None is Ray's default for a function trainable, one CPU."""
    if isinstance(resources, PlacementGroupFactory):
        return resources
    if resources is None:
        return PlacementGroupFactory([{"CPU": 1}])
    if isinstance(resources, Mapping):
        return resource_dict_to_pg_factory(resources)
    bundle = getattr(resources, "worker_bundle", None)  # a ScalingConfig: its gang
    if isinstance(bundle, dict):
        return PlacementGroupFactory([bundle] * int(getattr(resources, "max_workers", 1)),
                                     getattr(resources, "placement_strategy", "PACK"))
    raise ConfigError(
        f"Trial resources {resources!r}: give a dict such as {{'CPU': 2}}, a "
        "PlacementGroupFactory or a ScalingConfig."
    )
