"""``ResourceChangingScheduler``: change live trials' resources at checkpoint boundaries.

Ray's scheduler and its allocation functions (``DistributeResources``,
``DistributeResourcesToTopJob``), ported with Ray's arithmetic. The scheduler wraps another
one; when that one lets a trial continue and the allocation function gives the trial other
resources, the trial is paused (its job stops; it keeps its latest reported checkpoint) and
resumed from that checkpoint with the new resources: a new job whose worker holds them
(``tune.get_context().get_trial_resources()`` inside the trial says which).

The allocation function is called as in Ray with ``(tune_controller, trial, result,
scheduler)``; ``tune_controller`` is a read-only view of the experiment offering
``get_live_trials()``, ``get_trials()`` and ``_resource_updater.get_num_cpus()`` /
``get_num_gpus()`` (the cluster's totals), which is what Ray's functions use.
"""

from __future__ import annotations

import logging
import pickle
import warnings
from collections.abc import Callable
from copy import deepcopy
from typing import TYPE_CHECKING, Any

import numpy as np

from tandem.tune.execution.placement_groups import (
    PlacementGroupFactory,
    _sum_bundles,
    as_placement_group_factory,
)
from tandem.tune.schedulers.base import CONTINUE, Action, Decision, TrialScheduler, TrialSuggestion
from tandem.tune.schedulers.fifo import FIFOScheduler
from tandem.tune.trial import Trial, TrialStatus

if TYPE_CHECKING:
    from tandem.tune.controller import ControllerView

__all__ = ["DistributeResources", "DistributeResourcesToTopJob", "ResourceChangingScheduler"]

logger = logging.getLogger(__name__)


class DistributeResources:
    """This class creates a basic uniform resource allocation function.

    The function naively balances free resources (CPUs and GPUs) between
    trials, giving them all equal priority, ensuring that all resources
    are always being used. The free resources will be placed in new bundles.
    The function assumes that all bundles are equal (there is no "head"
    bundle).

    If for some reason a trial ends up with
    more resources than there are free ones, it will adjust downwards.
    It will also ensure that trial as at least as many resources as
    it started with (``base_trial_resource``).

    The function returns a new ``PlacementGroupFactory`` with updated
    resource requirements, or None. If the returned
    ``PlacementGroupFactory`` is equal by value to the one the
    trial has currently, the scheduler will skip the update process
    internally (same with None).

    If you wish to implement your own resource distribution logic,
    you can do so by extending this class, as it provides several
    generic methods. You can also implement a function instead.

    Args:
        add_bundles: If True, create new bundles from free resources.
            Otherwise, spread them among base_trial_resource bundles.
        increase_by: A dict with key-value
            pairs representing an atomic unit of resources (name-amount)
            the trial will be increased by. If not set, the trial will
            increase by 1 CPU/GPU.
        increase_by_times: If set to >=1 and ``increase_by`` is set,
            the trial will increase by maximum of
            ``increase_by_times * increase_by`` resources. If set to <1,
            no upper limit is set. Ignored if ``increase_by`` is not set.
        reserve_resources: A dict of
            resource_name-amount pairs representing the resources
            that will not be allocated to resized trials.
    """

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: dict[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: dict[str, float] | None = None,
    ):
        self.add_bundles = add_bundles
        self.increase_by = increase_by or {}
        self.increase_by_times = increase_by_times
        self.reserve_resources = reserve_resources or {}
        self.metric: str | None = None
        self.mode: str | None = None

    def _validate(
        self, base_trial_resource: PlacementGroupFactory | None, result: dict[str, Any]
    ) -> bool:
        """Return False if we should keep the current resources outright."""
        if not isinstance(base_trial_resource, PlacementGroupFactory):
            raise ValueError(
                f"{self.__class__.__name__} only supports PlacementGroupFactories."
            )

        if not self.add_bundles and len(base_trial_resource.bundles) > 1:
            raise ValueError(
                "If `add_bundles` is False, the number of bundles in "
                "`resources_per_trial` must be 1 "
                f"(got {len(base_trial_resource.bundles)})."
            )

        # Don't bother if this is just the first iteration
        if result["training_iteration"] < 1:
            return False
        return True

    def _get_total_available_resources(
        self, tune_controller: Any
    ) -> tuple[float, float]:
        """Get the number of CPUs and GPUs avaialble in total (not just free)"""
        total_available_cpus = (
            tune_controller._resource_updater.get_num_cpus()
            - self.reserve_resources.get("CPU", 0)
        )
        total_available_gpus = (
            tune_controller._resource_updater.get_num_gpus()
            - self.reserve_resources.get("GPU", 0)
        )
        return total_available_cpus, total_available_gpus

    def _get_used_cpus_and_gpus(self, t: Trial) -> tuple[float, float]:
        """Check how many CPUs and GPUs a trial is using currently"""
        return (
            t.placement_group_factory.required_resources.get("CPU", 0),
            t.placement_group_factory.required_resources.get("GPU", 0),
        )

    def _get_resources_from_bundles(
        self, bundles: list[dict[str, float]]
    ) -> dict[str, float]:
        """Get total sums of resources in bundles"""
        if not bundles:
            return {"CPU": 0, "GPU": 0}
        return _sum_bundles(bundles)

    def _is_bundle_empty(self, bundle: dict[str, float]) -> bool:
        return not (bundle.get("CPU", 0) or bundle.get("GPU", 0))

    def _add_two_bundles(
        self,
        bundles_a: list[dict[str, float]],
        bundles_b: list[dict[str, float]],
        increase_by: dict[str, float],
        limit_to_increase_by_times: bool,
        max_increase_by_times: int = -1,
    ) -> list[dict[str, float]]:
        """Add two bundles together.

        If ``limit_to_increase_by_times`` is True, ``self.increase_by_times`` > 0
        and ``max_increase_by_times`` > 0, ensure that the resulting number of
        bundles is not above ``min(max_increase_by_times, self.increase_by_times)``.

        If ``limit_to_increase_by_times`` is True and ``self.increase_by_times`` > 0,
        ensure that the resulting number of bundles is not above
        `self.increase_by_times``.
        """
        if limit_to_increase_by_times:
            if max_increase_by_times > 0 and self.increase_by_times > 0:
                max_increase_by_times = min(
                    max_increase_by_times, self.increase_by_times
                )
            elif self.increase_by_times > 0:
                max_increase_by_times = self.increase_by_times

        if self.add_bundles:
            bundles = [b for b in bundles_a if not self._is_bundle_empty(b)] + [
                b for b in bundles_b if not self._is_bundle_empty(b)
            ]
            if max_increase_by_times > 0:
                bundles = bundles[:max_increase_by_times]
        else:
            bundles_a = bundles_a or [{}]
            bundles_b = bundles_b or [{}]
            bundles = [
                {
                    "CPU": bundles_a[0].get("CPU", 0) + bundles_b[0].get("CPU", 0),
                    "GPU": bundles_a[0].get("GPU", 0) + bundles_b[0].get("GPU", 0),
                }
            ]
            if max_increase_by_times > 0:
                bundles[0]["CPU"] = min(
                    bundles[0]["CPU"],
                    increase_by.get("CPU", 0) * max_increase_by_times,
                )
                bundles[0]["GPU"] = min(
                    bundles[0]["GPU"],
                    increase_by.get("GPU", 0) * max_increase_by_times,
                )

        return bundles

    def _get_multiplier(
        self,
        increase_by: dict[str, float],
        cpus: float = 0,
        gpus: float = 0,
        max_multiplier: int = -1,
    ) -> int:
        """Get how many times ``increase_by`` bundles
        occur in ``cpus`` and ``gpus``."""
        if increase_by.get("CPU", 0) and increase_by.get("GPU", 0):
            multiplier = min(
                cpus // increase_by.get("CPU", 0),
                gpus // increase_by.get("GPU", 0),
            )
        elif increase_by.get("GPU", 0):
            multiplier = gpus // increase_by.get("GPU", 0)
        else:
            multiplier = cpus // increase_by.get("CPU", 0)

        if max_multiplier > 0 and multiplier > 0:
            multiplier = min(max_multiplier, multiplier)
        return int(multiplier)

    def _remove_bundles(
        self,
        bundles: list[dict[str, float]],
        increase_by: dict[str, float],
        multiplier: int,
    ) -> list[dict[str, float]]:
        """Remove ``multiplier`` ``increase_by`` bundles from ``bundles``."""
        multiplier = -abs(multiplier)
        if self.add_bundles:
            bundles = bundles[:multiplier]
        else:
            bundles = deepcopy(bundles)
            bundles[0]["CPU"] += increase_by.get("CPU", 0) * multiplier
            bundles[0]["GPU"] += increase_by.get("GPU", 0) * multiplier
            bundles[0]["CPU"] = max(bundles[0]["CPU"], 0)
            bundles[0]["GPU"] = max(bundles[0]["GPU"], 0)
        return bundles

    def _create_new_bundles(
        self,
        increase_by: dict[str, float],
        multiplier: int,
    ) -> list[dict[str, float]]:
        """Create a list of new bundles containing ``increase_by`` * ``multiplier``."""
        multiplier = abs(multiplier)

        if self.add_bundles:
            bundles = [increase_by] * int(multiplier)
        else:
            bundles = [{}]
            bundles[0]["CPU"] = increase_by.get("CPU", 0) * multiplier
            bundles[0]["GPU"] = increase_by.get("GPU", 0) * multiplier

        return bundles

    def _modify_bundles_with_free_resources(
        self,
        bundles: list[dict[str, float]],
        increase_by: dict[str, float],
        free_cpus: float,
        free_gpus: float,
        *,
        max_multiplier: int = -1,
        max_increase_by_times: int = -1,
    ) -> list[dict[str, float]]:
        """Given free resources, increase/decrease the number of bundles in
        ``bundles``."""
        multiplier = self._get_multiplier(
            increase_by, free_cpus, free_gpus, max_multiplier
        )
        if multiplier < 0:
            bundles = self._remove_bundles(bundles, increase_by, multiplier)
        elif multiplier > 0:
            bundles_to_add = self._create_new_bundles(increase_by, multiplier)
            bundles = self._add_two_bundles(
                bundles, bundles_to_add, increase_by, True, max_increase_by_times
            )
        return bundles

    def _get_added_bundles(
        self, bundles: list[dict[str, float]], base_bundles: list[dict[str, float]]
    ) -> list[dict[str, float]]:
        """Return the difference between bundles and base_bundles"""
        if self.add_bundles:
            added_bundles = bundles[len(base_bundles) :]
        else:
            if not bundles:
                bundles = [{"CPU": 0, "GPU": 0}]
            if not base_bundles:
                base_bundles = [{"CPU": 0, "GPU": 0}]
            added_bundles = [
                {
                    "CPU": bundles[0].get("CPU", 0) - base_bundles[0].get("CPU", 0),
                    "GPU": bundles[0].get("GPU", 0) - base_bundles[0].get("GPU", 0),
                }
            ]
        return added_bundles

    def _are_bundles_below_limit(
        self,
        bundles: list[dict[str, float]],
        base_bundles: list[dict[str, float]] | None = None,
        max_added_cpus: float | None = None,
        max_added_gpus: float | None = None,
    ) -> bool:
        if not max_added_cpus:
            if self.increase_by_times > 0:
                max_added_cpus = self.increase_by.get("CPU", 0) * self.increase_by_times
            else:
                max_added_cpus = np.inf
        if not max_added_gpus:
            if self.increase_by_times > 0:
                max_added_gpus = self.increase_by.get("GPU", 0) * self.increase_by_times
            else:
                max_added_gpus = np.inf
        added_resources = self._get_resources_from_bundles(
            self._get_added_bundles(bundles, base_bundles) if base_bundles else bundles
        )
        ret = (
            added_resources.get("CPU", -np.inf) < max_added_cpus
            or added_resources.get("GPU", -np.inf) < max_added_gpus
        )
        return ret

    def _get_new_added_bundles(
        self,
        trial: Trial,
        all_trials: list[Trial],
        base_bundles: list[dict[str, float]],
        increase_by: dict[str, float],
        total_available_cpus: float,
        total_available_gpus: float,
        used_cpus: float,
        used_gpus: float,
    ) -> list[dict[str, float]]:
        """Returns updated added bundles."""
        upper_limit_all_trials_bundles: list[list[dict[str, float]]] = [
            [] for _ in range(len(all_trials))]

        free_cpus = total_available_cpus - used_cpus
        free_gpus = total_available_gpus - used_gpus

        base_resources = self._get_resources_from_bundles(base_bundles)
        upper_limit_cpus_to_distribute = total_available_cpus - (
            base_resources.get("CPU", 0) * len(all_trials)
        )
        upper_limit_gpus_to_distribute = total_available_gpus - (
            base_resources.get("GPU", 0) * len(all_trials)
        )
        max_increase_by_times = 0

        # First, calculate upper limits for uniform allocation
        # This is done by simulating a clean slate scenario
        # The loop runs until all resources are allocated or
        # all trials are at their resource limits
        i = 0
        trials_at_limit: set[int] = set()
        while (
            len(trials_at_limit) < len(all_trials)
            # we have previously asserted that at least one resource has to be
            # bigger than 0
            and upper_limit_cpus_to_distribute >= increase_by.get("CPU", 0)
            and upper_limit_gpus_to_distribute >= increase_by.get("GPU", 0)
        ):
            idx = i % len(upper_limit_all_trials_bundles)
            old_bundles = deepcopy(upper_limit_all_trials_bundles[idx])
            upper_limit_all_trials_bundles[
                idx
            ] = self._modify_bundles_with_free_resources(
                upper_limit_all_trials_bundles[idx],
                increase_by,
                upper_limit_cpus_to_distribute,
                upper_limit_gpus_to_distribute,
                max_multiplier=1,
            )
            added_resources = self._get_resources_from_bundles(
                self._get_added_bundles(
                    upper_limit_all_trials_bundles[idx], old_bundles
                )
            )
            if not added_resources.get("CPU", 0) and not added_resources.get("GPU", 0):
                trials_at_limit.add(idx)
            elif idx == 0:
                max_increase_by_times += 1
            upper_limit_cpus_to_distribute -= added_resources.get("CPU", 0)
            upper_limit_gpus_to_distribute -= added_resources.get("GPU", 0)
            i += 1

        # Add new resourcs, but only up to calculated upper limits
        # (max_increase_by_times)
        return self._modify_bundles_with_free_resources(
            self._get_added_bundles(
                trial.placement_group_factory.bundles, base_bundles
            ),
            increase_by,
            free_cpus,
            free_gpus,
            max_increase_by_times=max_increase_by_times,
        )

    def __call__(
        self,
        tune_controller: Any,
        trial: Trial,
        result: dict[str, Any],
        scheduler: ResourceChangingScheduler,
    ) -> PlacementGroupFactory | None:
        """Run resource allocation logic.

        Returns a new ``PlacementGroupFactory`` with updated
        resource requirements, or None. If the returned
        ``PlacementGroupFactory`` is equal by value to the one the
        trial has currently, the scheduler will skip the update process
        internally (same with None).

        Args:
            tune_controller: Trial runner for this Tune run.
                Can be used to obtain information about other trials.
            trial: The trial to allocate new resources to.
            result: The latest results of trial.
            scheduler: The scheduler calling
                the function.

        Returns:
            A new ``PlacementGroupFactory`` with updated resource requirements,
            or None if the trial's resources should be left unchanged.
        """
        # Get base trial resources as defined in
        # ``tune.run(resources_per_trial)``
        base_trial_resource = scheduler.base_trial_resources

        if not self._validate(base_trial_resource=base_trial_resource, result=result):
            return None

        # default values if resources_per_trial is unspecified
        if base_trial_resource is None:
            base_trial_resource = PlacementGroupFactory([{"CPU": 1, "GPU": 0}])

        if self.increase_by:
            increase_by = self.increase_by
            assert not self._is_bundle_empty(increase_by)
            assert increase_by.get("CPU", 0) >= 0 and increase_by.get("GPU", 0) >= 0
        elif self.add_bundles:
            increase_by = base_trial_resource.bundles[-1]
        elif base_trial_resource.bundles[0].get("GPU", 0):
            increase_by = {"GPU": 1}
        else:
            increase_by = {"CPU": 1}

        base_bundles = deepcopy(base_trial_resource.bundles)

        (
            total_available_cpus,
            total_available_gpus,
        ) = self._get_total_available_resources(tune_controller=tune_controller)

        all_trials = tune_controller.get_live_trials()

        used_cpus_and_gpus = [self._get_used_cpus_and_gpus(t) for t in all_trials]
        used_cpus, used_gpus = zip(*used_cpus_and_gpus)
        used_cpus = sum(used_cpus)
        used_gpus = sum(used_gpus)

        added_bundles = self._get_new_added_bundles(
            trial,
            all_trials,
            base_bundles,
            increase_by,
            total_available_cpus,
            total_available_gpus,
            used_cpus,
            used_gpus,
        )

        new_bundles = self._add_two_bundles(
            base_bundles, added_bundles, increase_by, False
        )

        pgf = PlacementGroupFactory(
            new_bundles,
            base_trial_resource.strategy,
            *base_trial_resource._args,
            **base_trial_resource._kwargs,
        )
        pgf._head_bundle_is_empty = base_trial_resource._head_bundle_is_empty
        return pgf


class DistributeResourcesToTopJob(DistributeResources):
    """This class creates a "TopJob" resource allocation function.

    The function will assign all of the free resources to the best
    performing trial (as defined by ``metric`` and ``mode``). The
    previous best trials will not have their resources deallocated,
    unless in the case outlined below.

    If for some reason a trial ends up with
    more resources than there are free ones, it will adjust downwards.
    It will also ensure that trial as at least as many resources as
    it started with (``base_trial_resource``).

    The function returns a new ``PlacementGroupFactory`` with updated
    resource requirements, or None. If the returned
    ``PlacementGroupFactory`` is equal by value to the one the
    trial has currently, the scheduler will skip the update process
    internally (same with None).

    Args:
        add_bundles: If True, create new bundles from free resources.
            Otherwise, spread them among base_trial_resource bundles.
        increase_by: A dict with key-value
            pairs representing an atomic unit of resources (name-amount)
            the trial will be increased by. If not set, the trial will
            increase by 1 CPU/GPU.
        increase_by_times: If set to >=1 and ``increase_by`` is set,
            the trial will increase by maximum of
            ``increase_by_times * increase_by`` resources. If set to <1,
            no upper limit is set. Ignored if ``increase_by`` is not set.
        reserve_resources: A dict of
            resource_name-amount pairs representing the resources
            that will not be allocated to resized trials.
            is that the attribute should increase monotonically.
        metric: The training result objective value attribute. Stopping
            procedures will use this attribute. If None, will use the metric
            of the scheduler.
        mode: One of {min, max}. Determines whether objective is
            minimizing or maximizing the metric attribute. If None, will use the metric
            of the scheduler.

    """

    def __init__(
        self,
        add_bundles: bool = False,
        increase_by: dict[str, float] | None = None,
        increase_by_times: int = -1,
        reserve_resources: dict[str, float] | None = None,
        metric: str | None = None,
        mode: str | None = None,
    ):
        super().__init__(add_bundles, increase_by, increase_by_times, reserve_resources)
        self.metric = metric
        self.mode: str | None = mode

    @property
    def _metric_op(self) -> float:
        if self.mode not in ("min", "max"):
            raise ValueError("The mode parameter can only be either min or max.")
        if self.mode == "max":
            return 1.0
        return -1.0

    def _get_new_added_bundles(
        self,
        trial: Trial,
        all_trials: list[Trial],
        base_bundles: list[dict[str, float]],
        increase_by: dict[str, float],
        total_available_cpus: float,
        total_available_gpus: float,
        used_cpus: float,
        used_gpus: float,
    ) -> list[dict[str, float]]:
        if self.metric is None:
            raise ValueError(
                "The metric parameter cannot be None. The parameter can be set in "
                "either `DistributeResourcesToTopJob`, the base scheduler or in "
                "`tune.TuneConfig()` (highest to lowest priority)."
            )

        free_cpus = total_available_cpus - used_cpus
        free_gpus = total_available_gpus - used_gpus

        sorted_trials = sorted(
            all_trials,
            key=lambda t: -self._metric_op * (t.last_result or {}).get(self.metric or "", np.inf),
        )

        added_bundles = self._get_added_bundles(
            trial.placement_group_factory.bundles, base_bundles
        )

        best_trial = next(
            (
                t
                for t in sorted_trials
                if self._are_bundles_below_limit(
                    t.placement_group_factory.bundles, base_bundles
                )
            ),
            sorted_trials[0],
        )

        if (
            trial.trial_id != best_trial.trial_id
            # Only reduce resources here
            and self._get_multiplier(increase_by, free_cpus, free_gpus) >= 0
        ):
            return added_bundles

        return self._modify_bundles_with_free_resources(
            added_bundles,
            increase_by,
            free_cpus,
            free_gpus,
        )


_DistributeResourcesDefault = DistributeResources(add_bundles=False)
_DistributeResourcesDistributedDefault = DistributeResources(add_bundles=True)

AllocationFunction = Callable[[Any, Trial, dict[str, Any], "ResourceChangingScheduler"],
                              "PlacementGroupFactory | dict[str, float] | None"]


class ResourceChangingScheduler(TrialScheduler):
    """Wraps a scheduler and changes the resources of live trials (Ray's, beta).

    After every result the wrapped ``base_scheduler`` decides first. When it says
    CONTINUE, ``resources_allocation_function(tune_controller, trial, result, self)`` may
    return new resources (a ``PlacementGroupFactory``, or a resources dict); if they differ
    from the trial's, the trial is paused and resumed from its latest checkpoint with them.
    The trainable should therefore report a checkpoint (ideally every iteration) and load
    it from ``tune.get_checkpoint()``; ``tune.get_context().get_trial_resources()`` gives
    the resources it now has.

    Args:
        base_scheduler: The scheduler deciding about trials (default: ``FIFOScheduler()``).
        resources_allocation_function: The callable described above; None changes nothing
            (with a warning, as Ray). Default: :class:`DistributeResources`, which shares
            the free CPUs/GPUs among the live trials.
    """

    requires_metric = False

    def __init__(
        self,
        base_scheduler: TrialScheduler | None = None,
        resources_allocation_function: AllocationFunction | None = _DistributeResourcesDefault,
    ) -> None:
        super().__init__()
        if resources_allocation_function is None:
            warnings.warn(
                "`resources_allocation_function` is None. No resource requirements will be "
                "changed at any time. Pass a correctly defined function to enable "
                "functionality.", stacklevel=2)
        if base_scheduler is not None and not isinstance(base_scheduler, TrialScheduler):
            from tandem._core.errors import ConfigError

            raise ConfigError(
                f"ResourceChangingScheduler(base_scheduler={base_scheduler!r}): it must be a "
                "trial scheduler such as ASHAScheduler() or FIFOScheduler()."
            )
        self._resources_allocation_function = resources_allocation_function
        self._base_scheduler = base_scheduler or FIFOScheduler()
        self._base_trial_resources: PlacementGroupFactory | None = None
        self._trials_to_reallocate: dict[str, Any] = {}
        self._reallocated_trial_ids: set[str] = set()
        self._trials: dict[str, Trial] = {}
        self._tune_controller: Any = None

    @property
    def metric(self) -> str | None:
        return self._base_scheduler.metric

    @property
    def mode(self) -> str | None:
        return self._base_scheduler.mode

    @property
    def base_trial_resources(self) -> PlacementGroupFactory | None:
        return self._base_trial_resources

    def bind_controller_view(self, view: ControllerView) -> None:
        """Called by the tune controller once: the read-only view given to the allocation
        function as ``tune_controller``."""
        self._tune_controller = view

    def set_search_properties(self, metric: str | None, mode: str | None,
                              config: dict[str, Any] | None = None) -> bool:
        self._metric, self._mode = metric, mode
        return self._base_scheduler.set_search_properties(metric, mode, config=config)

    def on_trial_add(self, trial: Trial) -> None:
        self._trials[trial.trial_id] = trial
        resources = trial.placement_group_factory
        if self._base_trial_resources is None:
            self._base_trial_resources = resources
        elif trial.trial_id not in self._reallocated_trial_ids and \
                resources != self._base_trial_resources:
            raise RuntimeError(
                "ResourceChangingScheduler doesn't support trials with varying base "
                f"resources. First trial had {self._base_trial_resources}, trial {trial} has "
                f"{resources}."
            )
        self._base_scheduler.on_trial_add(trial)

    def on_trial_error(self, trial: Trial) -> None:
        self._forget(trial)
        self._base_scheduler.on_trial_error(trial)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any] | None) -> None:
        self._forget(trial)
        self._base_scheduler.on_trial_complete(trial, result)

    def on_trial_remove(self, trial: Trial) -> None:
        self._forget(trial)
        self._base_scheduler.on_trial_remove(trial)

    def _forget(self, trial: Trial) -> None:
        self._trials_to_reallocate.pop(trial.trial_id, None)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        decision = self._base_scheduler.on_trial_result(trial, result)
        if decision.action is Action.CONTINUE:
            new_resources = self.reallocate_trial_resources_if_needed(
                self._tune_controller, trial, result)
            if new_resources:
                self._trials_to_reallocate[trial.trial_id] = new_resources
                return Decision.pause(f"resources change to {_describe(new_resources)}")
        return decision if decision.action is not Action.CONTINUE else CONTINUE

    def suggest(self) -> TrialSuggestion | None:
        """Resumes a trial this scheduler paused, with its new resources, once its job has
        ended (Ray's ``choose_trial_to_run``); otherwise what the base scheduler suggests."""
        for trial_id, new_resources in list(self._trials_to_reallocate.items()):
            trial = self._trials.get(trial_id)
            if trial is None or trial.status is TrialStatus.RUNNING:
                continue  # still running: its job has not stopped yet
            del self._trials_to_reallocate[trial_id]
            if trial.status is not TrialStatus.PAUSED:
                continue
            if self.set_trial_resources(trial, new_resources):
                return TrialSuggestion.resume(
                    trial_id, f"resources change to {_describe(new_resources)}",
                    resources=as_placement_group_factory(new_resources))
        return self._base_scheduler.suggest()

    def debug_string(self) -> str:
        return f"(ResourceChangingScheduler) {self._base_scheduler.debug_string()}"

    def save(self, checkpoint_path: str) -> None:
        state = {k: v for k, v in self.__dict__.items() if k not in ("_trials", "_tune_controller")}
        with open(checkpoint_path, "wb") as f:
            pickle.dump(state, f)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as f:
            self.__dict__.update(pickle.load(f))

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_tune_controller"] = None  # a live view of this run's controller
        return state

    def set_trial_resources(self, trial: Trial, new_resources: object) -> bool:
        """Records ``new_resources`` for ``trial`` (the controller applies them when it
        resumes the trial); True if there were any."""
        if new_resources:
            logger.info("Setting trial %s resource to %s", trial, _describe(new_resources))
            self._reallocated_trial_ids.add(trial.trial_id)
            return True
        return False

    def _are_resources_the_same(self, trial: Trial, new_resources: object) -> bool:
        return isinstance(new_resources, PlacementGroupFactory) and \
            trial.placement_group_factory == new_resources

    def reallocate_trial_resources_if_needed(
        self, tune_controller: Any, trial: Trial, result: dict[str, Any]
    ) -> PlacementGroupFactory | dict[str, float] | None:
        """The allocation function's new resources for ``trial``, or None when they are
        missing or the same as the trial's."""
        fn = self._resources_allocation_function
        if fn is None:
            return None
        if not getattr(fn, "metric", None):
            fn.metric = self._base_scheduler.metric or self._metric  # type: ignore[attr-defined]
        if not getattr(fn, "mode", None):
            fn.mode = self._base_scheduler.mode or self._mode  # type: ignore[attr-defined]
        new_resources = fn(tune_controller, trial, result, self)
        if new_resources and not self._are_resources_the_same(trial, new_resources):
            return new_resources
        return None


def _describe(resources: object) -> str:
    if isinstance(resources, PlacementGroupFactory):
        return repr(resources.bundles)
    return repr(resources)
