"""``MedianStoppingRule``: stop trials whose best result is worse than the running median."""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.schedulers._paused import PausedTrials
from tandem.tune.schedulers.base import CONTINUE, Decision, TrialScheduler, TrialSuggestion
from tandem.tune.trial import Trial

__all__ = ["MedianStoppingRule"]

logger = logging.getLogger(__name__)


class MedianStoppingRule(TrialScheduler):
    """Stops a trial whose best result so far is worse than the median of the others.

    At time ``t >= grace_period`` a trial is compared with every other trial whose latest
    result has reached ``t``: the median over those trials of their mean result between
    ``grace_period`` and ``t``. If the trial's best result is strictly worse, it stops
    (``hard_stop``) or pauses. With fewer than ``min_samples_required`` such trials it
    instead yields to waiting (PENDING or PAUSED) trials by pausing, at most once per
    ``min_time_slice``. Paused trials are resumed via :meth:`suggest` when no trial is
    PENDING. Time comes only from ``result[time_attr]``. As Ray's ``MedianStoppingRule``.

    Keeps every result of every trial in memory (as Ray does); use a sparse ``time_attr``
    for very long trials.

    Args:
        time_attr: Result key measuring time.
        metric: Result key to optimize (TuneConfig's when None).
        mode: ``"min"`` or ``"max"``.
        grace_period: No trial is stopped before this ``time_attr``.
        min_samples_required: Trials needed to compute a median.
        min_time_slice: Minimum ``time_attr`` between two yields of one trial.
        hard_stop: STOP (True) or PAUSE (False) trials that fall below the median.
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        if grace_period < 0:
            raise ConfigError(f"{name}(grace_period={grace_period!r}): must be >= 0.")
        if (
            isinstance(min_samples_required, bool)
            or not isinstance(min_samples_required, int)
            or min_samples_required < 1
        ):
            raise ConfigError(
                f"{name}(min_samples_required={min_samples_required!r}): must be an int >= 1."
            )
        if min_time_slice < 0:
            raise ConfigError(f"{name}(min_time_slice={min_time_slice!r}): must be >= 0.")
        self._time_attr = time_attr
        self._grace_period = grace_period
        self._min_samples_required = min_samples_required
        self._min_time_slice = min_time_slice
        self._hard_stop = hard_stop
        self._stopped: set[str] = set()
        self._last_pause: dict[str, float] = defaultdict(lambda: float("-inf"))
        self._results: dict[str, list[tuple[float, float]]] = defaultdict(list)  # (time, value)
        self._trials = PausedTrials()

    def on_trial_add(self, trial: Trial) -> None:
        self._trials.add(trial)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        if not self._check_result(result, self._time_attr):
            return CONTINUE
        tid = trial.trial_id
        if tid in self._stopped:
            return CONTINUE  # paused below the median earlier (hard_stop=False): run on
        time = result[self._time_attr]
        self._results[tid].append((time, float(result[self._metric])))  # type: ignore[index]
        if time < self._grace_period:
            return CONTINUE
        others = [t for t in self._trials_beyond_time(time) if t != tid]
        if len(others) < self._min_samples_required:
            return self._on_insufficient_samples(trial, time, len(others))
        import numpy as np  # here, not at import: the tuner looks this class up per experiment

        median = float(np.median([self._running_mean(t, time) for t in others]))
        best = self._best_result(tid)
        worse = best < median if self._mode == "max" else best > median
        if not worse:
            return CONTINUE
        self._stopped.add(tid)
        reason = (
            f"best {self._metric}={best:.6g} is worse than the median {median:.6g} of "
            f"{len(others)} other trials' running means at {self._time_attr}={time:g}"
        )
        if self._hard_stop:
            return Decision.stop(reason)
        self._trials.mark_paused(trial)
        return Decision.pause(reason)

    def on_trial_complete(self, trial: Trial, result: dict[str, Any] | None) -> None:
        if result is not None and self._check_result(result, self._time_attr):
            entry = (result[self._time_attr], float(result[self._metric]))  # type: ignore[index]
            series = self._results[trial.trial_id]
            if not series or series[-1] != entry:  # the last result is usually seen already
                series.append(entry)
        self._trials.remove(trial)

    def on_trial_error(self, trial: Trial) -> None:
        self._trials.remove(trial)

    def on_trial_remove(self, trial: Trial) -> None:
        self._trials.remove(trial)

    def suggest(self) -> TrialSuggestion | None:
        return self._trials.next_resume(reason="no trial is waiting to start")

    def _on_insufficient_samples(self, trial: Trial, time: float, n: int) -> Decision:
        if time - self._last_pause[trial.trial_id] > self._min_time_slice and (
            self._trials.others_waiting(trial)
        ):
            self._last_pause[trial.trial_id] = time
            self._trials.mark_paused(trial)
            return Decision.pause(
                f"only {n} other trials reached {self._time_attr}={time:g} (need "
                f"{self._min_samples_required}); yielding to waiting trials"
            )
        return CONTINUE

    def _trials_beyond_time(self, time: float) -> list[str]:
        return [t for t, series in self._results.items() if series and series[-1][0] >= time]

    def _running_mean(self, trial_id: str, time: float) -> float:
        values = [v for t, v in self._results[trial_id] if self._grace_period <= t <= time]
        if not values:
            return float("nan")
        import numpy as np

        return float(np.mean(values))

    def _best_result(self, trial_id: str) -> float:
        values = [v for _, v in self._results[trial_id]]
        return max(values) if self._mode == "max" else min(values)

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped)}."
