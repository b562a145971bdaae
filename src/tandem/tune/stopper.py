"""Stop criteria: ``RunConfig(stop=...)`` as a dict of thresholds, a function, or a Stopper."""

from __future__ import annotations

import datetime
import logging
import math
import time
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem._core.results import MISSING, lookup

logger = logging.getLogger(__name__)


class Stopper:
    """``__call__(trial_id, result) -> bool`` stops one trial; ``stop_all()`` ends the experiment.

    ``trial_local``: set it to True on a stopper that decides each trial from that trial's
    own results only (its state per trial, built in the order they come; no clock, no
    other trial; ``stop_all()`` always False) and that pickles. The tuner then runs a copy
    of it next to each trial (in its worker, on a train server too), taken when the trial
    starts, and only the reports where the copy would stop wait for the tuner's verdict;
    the others go on at once. Decisions stay at the result that made them: the tuner's own
    stopper still judges every result. A stopper that reads keys the tuner adds
    (``trial_id``, ``timestamp``, ``date``, ...) is not trial-local.
    """

    trial_local: bool = False

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


class DictStopper(Stopper):
    """Ray Tune's dict criteria: a trial stops at the first result where, for any key,
    ``result[key] >= value`` (nested keys as ``"a/b"``). A boolean works as Ray's does:
    ``{"done": True}`` stops once the trial reports a truthy ``done``. A result with
    ``done`` true ends its trial whatever the criteria."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        for key, value in criteria.items():
            if isinstance(value, Mapping):
                raise ConfigError(
                    f"RunConfig(stop={dict(criteria)!r}): nest criteria with '/' in the key "
                    f"(e.g. {{'{key}/<inner key>': value}}), not as a dict."
                )
            if not isinstance(value, (int, float)):
                raise ConfigError(
                    f"RunConfig(stop={dict(criteria)!r}): the threshold for {key!r} must be a "
                    f"number or a bool (the trial stops once result[{key!r}] >= it), got "
                    f"{value!r}."
                )
        self.criteria = dict(criteria)
        self._warned: set[str] = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if result.get("done"):
            return True
        for key, value in self.criteria.items():
            got = lookup(result, key)
            if got is MISSING:
                if key not in self._warned:
                    self._warned.add(key)
                    logger.warning(
                        "Stopping criterion %r not found in the result; available keys are %s. "
                        "If %r is never reported, the trial runs until it ends.",
                        key, sorted(result), key)
                continue
            try:
                if got >= value:
                    return True
            except TypeError as e:
                raise ConfigError(
                    f"RunConfig(stop={{{key!r}: {value!r}}}): the trial reported {key}={got!r}, "
                    f"which cannot be compared with {value!r}; report a number or a bool."
                ) from e
        return False


class FunctionStopper(Stopper):
    """Stops a trial when ``function(trial_id, result)`` returns true."""

    def __init__(self, function: Callable[[str, dict[str, Any]], bool]) -> None:
        self.fn = function

    @classmethod
    def is_valid_function(cls, fn: object) -> bool:
        """Ray's check: a plain callable (not a ``Stopper``); one with a ``stop_all`` must
        subclass ``Stopper`` to be recognised as one."""
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ConfigError(
                f"{fn!r} has stop_all() but is not a tandem.tune.Stopper: subclass Stopper "
                f"so that it is used as one.")
        return is_function

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.fn(trial_id, result))


def make_stopper(stop: Any) -> Stopper | None:
    if stop is None:
        return None
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return DictStopper(stop)
    if callable(getattr(stop, "stop_all", None)) and callable(stop):
        return stop  # a duck-typed Stopper (e.g. written for Ray Tune)
    if callable(stop):
        return FunctionStopper(stop)
    raise ConfigError(
        f"RunConfig(stop={stop!r}) is not understood: give a dict of thresholds such as "
        f"{{'training_iteration': 10}}, a function (trial_id, result) -> bool, or a Stopper."
    )


# -- the stoppers of ``ray.tune.stopper``, with Ray's semantics (ported from Ray 2.60,
# -- Apache-2.0, ray-project/ray: python/ray/tune/stopper/) ------------------------------


class NoopStopper(Stopper):
    """Never stops anything."""


class CombinedStopper(Stopper):
    """Stops a trial when any of ``stoppers`` would, and the experiment likewise."""

    def __init__(self, *stoppers: Stopper) -> None:
        self._stoppers = tuple(make_stopper(s) for s in stoppers)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        # as Ray: the first stopper that stops the trial ends the check
        return any(bool(s(trial_id, result)) for s in self._stoppers if s is not None)

    def stop_all(self) -> bool:
        return any(bool(s.stop_all()) for s in self._stoppers if s is not None)


class MaximumIterationStopper(Stopper):
    """Stops a trial after ``max_iter`` results (counted by this stopper)."""

    def __init__(self, max_iter: int) -> None:
        self._max_iter = max_iter
        self._iter: dict[str, int] = defaultdict(int)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._iter[trial_id] += 1
        return self._iter[trial_id] >= self._max_iter


class TimeoutStopper(Stopper):
    """Stops the experiment once ``timeout`` (seconds or a ``timedelta``) has been spent,
    counted from the first check (a restored experiment goes on with what was left)."""

    def __init__(self, timeout: float | datetime.timedelta) -> None:
        if isinstance(timeout, datetime.timedelta):
            self._timeout_seconds = timeout.total_seconds()
        elif isinstance(timeout, (int, float)) and not isinstance(timeout, bool):
            self._timeout_seconds = float(timeout)
        else:
            raise ConfigError(
                f"TimeoutStopper(timeout={timeout!r}): give a number of seconds or a "
                f"datetime.timedelta, got {type(timeout).__name__}.")
        self._budget = self._timeout_seconds
        self._last_check: float | None = None

    def stop_all(self) -> bool:
        now = time.time()
        if self._last_check is not None:
            self._budget -= now - self._last_check
        self._last_check = now
        if self._budget <= 0:
            logger.info("Reached timeout of %s seconds. Stopping all trials.",
                        self._timeout_seconds)
            return True
        return False

    def __setstate__(self, state: dict[str, Any]) -> None:
        state["_last_check"] = None
        self.__dict__.update(state)


def _np_sum(xs: list[float]) -> float:
    """``np.add.reduce`` of a float64 array of 1 to 128 values, bit for bit: in order below
    8 values, else numpy's pairwise sum (8 partial sums, combined as a tree, then the rest)."""
    n = len(xs)
    if n < 8:
        total = xs[0]
        for x in xs[1:]:
            total += x
        return total
    lanes = xs[:8]
    i = 8
    while i + 8 <= n:
        for j in range(8):
            lanes[j] += xs[i + j]
        i += 8
    total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + \
        ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]))
    for x in xs[i:]:
        total += x
    return total


def _window_std(values: Iterable[object]) -> float | None:
    """``float(np.std(values))`` for a short window of plain numbers, bit for bit, without
    numpy (a plateau check runs at every result, in the tuner and next to the trial, and
    ``np.std`` costs ~30-70 µs a call); None for anything else (numpy decides then).
    ``tests/unit/tune/test_stoppers.py`` compares both on random windows."""
    xs: list[float] = []
    for v in values:
        kind = type(v)  # exact types (isinstance for the type checker): a bool is numpy's
        if kind is float and isinstance(v, float):
            xs.append(v)
        elif kind is int and isinstance(v, int) and -(2**63) <= v < 2**63:  # int64 -> float64
            xs.append(float(v))
        else:  # None, bool, numpy scalars (float32 sums in float32), big ints: numpy's
            return None
    n = len(xs)
    if n == 0 or n > 128:
        return None
    mean = _np_sum(xs) / n
    return math.sqrt(_np_sum([(x - mean) * (x - mean) for x in xs]) / n)


class TrialPlateauStopper(Stopper):
    """Stops a trial once its ``metric`` has plateaued: the standard deviation of its last
    ``num_results`` values is below ``std``, after at least ``grace_period`` results (and,
    with ``metric_threshold``, once the value is at or better than it for ``mode``)."""

    trial_local = True  # each trial's decision reads its own last results only

    def __init__(self, metric: str, std: float = 0.01, num_results: int = 4,
                 grace_period: int = 4, metric_threshold: float | None = None,
                 mode: str | None = None) -> None:
        if metric_threshold is not None and mode not in ("min", "max"):
            raise ConfigError(
                f"TrialPlateauStopper(metric_threshold={metric_threshold!r}) needs "
                f"mode='min' or 'max' (which side of the threshold is good); got {mode!r}.")
        self._metric = metric
        self._mode = mode
        self._std = std
        self._num_results = num_results
        self._grace_period = grace_period
        self._metric_threshold = metric_threshold
        self._iter: dict[str, int] = defaultdict(int)
        self._trial_results: dict[str, deque] = defaultdict(
            lambda: deque(maxlen=self._num_results))

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        metric_result = result.get(self._metric)
        self._trial_results[trial_id].append(metric_result)
        self._iter[trial_id] += 1
        if self._iter[trial_id] < self._grace_period:
            return False
        if len(self._trial_results[trial_id]) < self._num_results:
            return False
        threshold = self._metric_threshold
        if threshold is not None:
            if self._mode == "min" and metric_result > threshold:  # type: ignore[operator]
                return False
            if self._mode == "max" and metric_result < threshold:  # type: ignore[operator]
                return False
        current_std = _window_std(self._trial_results[trial_id])
        if current_std is None:
            import numpy as np  # here: most programs never reach a plateau check

            try:
                current_std = float(np.std(self._trial_results[trial_id]))
            except Exception:  # noqa: BLE001 - e.g. a missing value (None): not a plateau
                current_std = float("inf")
        return current_std < self._std

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_trial_results"] = {k: list(v) for k, v in self._trial_results.items()}
        state["_iter"] = dict(self._iter)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        results = state["_trial_results"]
        self._trial_results = defaultdict(lambda: deque(maxlen=self._num_results))
        for k, v in results.items():
            self._trial_results[k].extend(v)
        self._iter = defaultdict(int, state["_iter"])


class ExperimentPlateauStopper(Stopper):
    """Stops the whole experiment once the ``top`` best values of ``metric`` (over every
    trial's results, best for ``mode``) have a standard deviation at most ``std`` for
    ``patience`` more results."""

    def __init__(self, metric: str, std: float = 0.001, top: int = 10, mode: str = "min",
                 patience: int = 0) -> None:
        if mode not in ("min", "max"):
            raise ConfigError(f"ExperimentPlateauStopper(mode={mode!r}): use 'min' or 'max'.")
        if not isinstance(top, int) or top <= 1:
            raise ConfigError(f"ExperimentPlateauStopper(top={top!r}): the number of top "
                              f"results to consider must be an integer greater than one.")
        if not isinstance(patience, int) or patience < 0:
            raise ConfigError(f"ExperimentPlateauStopper(patience={patience!r}): give an "
                              f"integer >= 0.")
        if not isinstance(std, float) or std <= 0:
            raise ConfigError(f"ExperimentPlateauStopper(std={std!r}): give a float > 0 "
                              f"(e.g. 0.001).")
        self._mode = mode
        self._metric = metric
        self._patience = patience
        self._iterations = 0
        self._std = std
        self._top = top
        self._top_values: list[float] = []

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        self._top_values.append(result[self._metric])
        if self._mode == "min":
            self._top_values = sorted(self._top_values)[: self._top]
        else:
            self._top_values = sorted(self._top_values)[-self._top:]
        if self.has_plateaued():
            self._iterations += 1
        else:
            self._iterations = 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        if len(self._top_values) != self._top:
            return False
        import numpy as np

        return float(np.std(self._top_values)) <= self._std

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience


__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
]
