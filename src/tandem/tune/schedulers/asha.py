"""``ASHAScheduler``: asynchronous successive halving (Ray's ``AsyncHyperBandScheduler``)."""

from __future__ import annotations

import bisect
import logging
import math
from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.schedulers.base import CONTINUE, Decision, TrialScheduler
from tandem.tune.trial import Trial

__all__ = ["ASHAScheduler", "AsyncHyperBandScheduler"]

logger = logging.getLogger(__name__)


def _linear_percentile(values: list[float], q: float) -> float:
    """``np.percentile(values, q)`` (method "linear") of sorted ``values``, bit for bit.

    The same operations in the same order as NumPy (``q / 100``, the virtual index
    ``(n - 1) * q``, and its two-sided lerp), so a score equal to the cutoff is judged as
    Ray's ``np.nanpercentile`` judges it: a textbook ``a + (b - a) * t`` can land one ulp
    above NumPy's value and stop a trial whose score ties the cutoff (common with
    accuracies, which take few distinct values).
    """
    n = len(values)
    index = (n - 1) * (q / 100)
    if index >= n - 1:
        return float(values[-1])
    lo = math.floor(index)
    a, b = values[lo], values[lo + 1]
    t = index - lo
    diff = b - a
    return float(b - diff * (1 - t) if t >= 0.5 else a + diff * t)


class _Bracket:
    """Rungs of one ASHA bracket and the scores recorded at each.

    Milestones are ``grace_period * rf**(k + s)`` for ``k`` in ``range(num_rungs)``, with
    ``num_rungs = int(log(max_t / grace_period) / log(rf) - s + 1)``; they are kept in
    descending order so the first rung a result has passed is found first.
    """

    __slots__ = ("_sorted", "rf", "rungs", "stop_last_trials")

    def __init__(
        self, min_t: float, max_t: float, rf: float, s: int, stop_last_trials: bool
    ) -> None:
        self.rf = rf
        num_rungs = int(math.log(max_t / min_t) / math.log(rf) - s + 1)
        self.rungs: list[tuple[float, dict[str, float]]] = [
            (min_t * rf ** (k + s), {}) for k in reversed(range(num_rungs))
        ]
        self.stop_last_trials = stop_last_trials
        # each rung's non-NaN scores, kept sorted: a decision costs O(log n), not O(n)
        self._sorted: dict[float, list[float]] = {m: [] for m, _ in self.rungs}

    @property
    def milestones(self) -> list[float]:
        """Milestones in ascending order."""
        return [m for m, _ in reversed(self.rungs)]

    def cutoff(self, milestone: float) -> float | None:
        """The score a trial must reach to continue: the ``1 - 1/rf`` quantile of the scores
        recorded at ``milestone`` (NaN ignored, linear interpolation: ``np.nanpercentile``)."""
        values = self._sorted[milestone]
        if not values:
            return None
        return _linear_percentile(values, (1 - 1 / self.rf) * 100)

    def on_result(self, trial_id: str, cur_iter: float, score: float | None) -> tuple[bool, str]:
        """Records ``score`` at the highest rung passed; returns ``(stop?, reason)``."""
        for milestone, recorded in self.rungs:
            if cur_iter >= milestone and trial_id in recorded and not self.stop_last_trials:
                # Already judged at this rung: keep going.
                break
            if cur_iter < milestone or trial_id in recorded:
                continue
            cutoff = self.cutoff(milestone)
            stop = cutoff is not None and score is not None and score < cutoff
            if score is None:
                logger.warning("ASHA: the metric is None for trial %s; not recorded", trial_id)
            else:
                recorded[trial_id] = score
                if not math.isnan(score):
                    bisect.insort(self._sorted[milestone], score)
            if stop:
                return True, (
                    f"score {score:.6g} below the rung-{milestone:g} cutoff {cutoff:.6g} "
                    f"(the top 1/{self.rf:g} of {len(recorded)} recorded scores continue)"
                )
            break
        return False, ""

    def __repr__(self) -> str:
        rungs = " | ".join(f"{m:g}: {self.cutoff(m)}" for m, _ in self.rungs)
        return f"Bracket({rungs})"


class ASHAScheduler(TrialScheduler):
    """Asynchronous successive halving: stop a trial that is not in the top ``1/rf`` at a rung.

    When a trial's ``time_attr`` reaches a rung milestone for the first time, its score is
    compared with the ``(1 - 1/reduction_factor)`` percentile of the scores recorded at that
    rung so far; below it, the trial is stopped. Trials reaching ``max_t`` are stopped
    (unless ``stop_last_trials=False``). With several brackets a new trial joins one at
    random, weighted by ``softmax(number of rungs)``. Exactly Ray's ``AsyncHyperBandScheduler``.

    Args:
        time_attr: Monotonically increasing result key measuring progress.
        metric: Result key to optimize (TuneConfig's when None).
        mode: ``"min"`` or ``"max"``.
        max_t: Trials stop at this ``time_attr``.
        grace_period: First rung; no trial is stopped before it.
        reduction_factor: ``rf``: roughly ``1/rf`` of trials continue at each rung.
        brackets: Number of brackets (bracket ``s`` starts at ``grace_period * rf**s``).
        stop_last_trials: Stop trials at ``max_t``.
        seed: Seed for the bracket choice.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
        seed: int | None = None,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        if not max_t > 0:
            raise ConfigError(f"{name}(max_t={max_t!r}): max_t must be > 0.")
        if not grace_period > 0:
            raise ConfigError(
                f"{name}(grace_period={grace_period!r}): grace_period must be > 0, e.g. 1."
            )
        if grace_period > max_t:
            raise ConfigError(
                f"{name}(grace_period={grace_period!r}, max_t={max_t!r}): grace_period must "
                "be <= max_t. Lower grace_period or raise max_t."
            )
        if not reduction_factor > 1:
            raise ConfigError(
                f"{name}(reduction_factor={reduction_factor!r}): reduction_factor must be > 1, "
                "e.g. 2, 3 or 4."
            )
        if isinstance(brackets, bool) or not isinstance(brackets, int) or brackets < 1:
            raise ConfigError(f"{name}(brackets={brackets!r}): brackets must be an int >= 1.")
        self._time_attr = time_attr
        self._max_t = max_t
        self._reduction_factor = reduction_factor
        self._stop_last_trials = stop_last_trials
        self._brackets = [
            _Bracket(grace_period, max_t, reduction_factor, s, stop_last_trials)
            for s in range(brackets)
        ]
        import numpy as np  # here, not at import: a program without ASHA never loads it

        sizes = np.array([len(b.rungs) for b in self._brackets], dtype=float)
        probs = np.exp(sizes - sizes.max())
        self._bracket_probs = probs / probs.sum()
        self._rng = np.random.default_rng(seed)
        self._trial_bracket: dict[str, int] = {}
        self._num_stopped = 0

    @property
    def brackets(self) -> list[_Bracket]:
        return self._brackets

    def on_trial_add(self, trial: Trial) -> None:
        if len(self._brackets) == 1:
            idx = 0
        else:
            idx = int(self._rng.choice(len(self._brackets), p=self._bracket_probs))
        self._trial_bracket[trial.trial_id] = idx

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        if not self._check_result(result, self._time_attr):
            return CONTINUE
        t = result[self._time_attr]
        if t >= self._max_t and self._stop_last_trials:
            self._num_stopped += 1
            return Decision.stop(f"{self._time_attr}={t} reached max_t={self._max_t}")
        bracket = self._brackets[self._bracket_of(trial)]
        stop, reason = bracket.on_result(trial.trial_id, t, self._score(result))
        if stop:
            self._num_stopped += 1
            return Decision.stop(f"{self._time_attr}={t}: {reason}")
        return CONTINUE

    def on_trial_complete(self, trial: Trial, result: dict[str, Any] | None) -> None:
        idx = self._trial_bracket.pop(trial.trial_id, None)
        if idx is None or result is None or not self._check_result(result, self._time_attr):
            return
        self._brackets[idx].on_result(trial.trial_id, result[self._time_attr], self._score(result))

    def on_trial_error(self, trial: Trial) -> None:
        self._trial_bracket.pop(trial.trial_id, None)

    def on_trial_remove(self, trial: Trial) -> None:
        self._trial_bracket.pop(trial.trial_id, None)

    def debug_string(self) -> str:
        return f"Using ASHA: num_stopped={self._num_stopped}; " + "; ".join(
            repr(b) for b in self._brackets
        )

    def _bracket_of(self, trial: Trial) -> int:
        if trial.trial_id not in self._trial_bracket:
            self.on_trial_add(trial)  # tolerate a controller that skipped on_trial_add
        return self._trial_bracket[trial.trial_id]

    def _score(self, result: dict[str, Any]) -> float | None:
        value = result[self._metric]  # type: ignore[index]
        return None if value is None else self._metric_op * float(value)


#: Ray's name for the same scheduler.
AsyncHyperBandScheduler = ASHAScheduler
