"""``HyperBandScheduler``: synchronous HyperBand (Ray's ``HyperBandScheduler``)."""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.schedulers.base import (
    CONTINUE,
    Action,
    Decision,
    TrialScheduler,
    TrialSuggestion,
)
from tandem.tune.trial import Trial

__all__ = ["HyperBandScheduler"]

logger = logging.getLogger(__name__)


class _Bracket:
    """One HyperBand bracket: up to ``n0`` trials, halved ``s`` times.

    Trials run until ``time_attr`` reaches the current milestone (``cumul_r``), then pause.
    When every live trial has reached it, the top ``ceil(n / eta)`` continue to the next
    milestone and the rest stop. Milestones follow Ray exactly:
    ``r <- int(min(r * eta, max_t)); cumul_r <- r`` (Ray 2.60; older Ray capped the last
    one at ``max_t - cumul_r``, which stopped trials short of ``max_t``)
    """

    def __init__(
        self,
        time_attr: str,
        max_trials: int,
        init_t_attr: int,
        max_t_attr: float,
        eta: float,
        s: int,
        stop_last_trials: bool,
    ) -> None:
        self.time_attr = time_attr
        self.live: dict[str, dict[str, Any] | None] = {}  # trial id -> latest result
        self.all_trials: list[str] = []
        self.n = self.n0 = max_trials
        self.r = self.r0 = init_t_attr
        self.max_t_attr = max_t_attr
        self.cumul_r: float = self.r0
        self.eta = eta
        self.halves = s
        self.s = s
        self.stop_last_trials = stop_last_trials
        self.total_work = self._total_work(self.n0, self.r0, s)
        self.completed_progress = 0.0

    @property
    def milestones(self) -> list[float]:
        """Every milestone this bracket will use, computed the way halving will."""
        out: list[float] = [self.r0]
        n, r = self.n0, self.r0
        for _ in range(self.s):
            n = math.ceil(n / self.eta)
            r = int(min(r * self.eta, self.max_t_attr))
            out.append(r)
        return out

    def add_trial(self, trial_id: str) -> None:
        assert not self.filled(), "cannot add a trial to a filled bracket"
        self.live[trial_id] = None
        self.all_trials.append(trial_id)

    def cur_iter_done(self) -> bool:
        return all(self._time(r) >= self.cumul_r for r in self.live.values())

    def finished(self) -> bool:
        if not self.stop_last_trials:
            return False
        return self.halves == 0 and self.cur_iter_done()

    def continue_trial(self, trial_id: str) -> bool:
        if not self.stop_last_trials and self.halves == 0:
            return True
        return self._time(self.live[trial_id]) < self.cumul_r

    def filled(self) -> bool:
        # Ray: len(live) == n, with every trial created up front (Tune's pending trials),
        # so a bracket takes its n0 first trials. tandem creates trials as slots free up:
        # counting the trials that joined keeps Ray's assignment when some already ended.
        return len(self.all_trials) >= self.n0 or len(self.live) == self.n

    def successive_halving(self, metric: str, metric_op: float) -> tuple[list[str], list[str]]:
        if self.halves == 0 and not self.stop_last_trials:
            return list(self.live), []
        assert self.halves > 0
        self.halves -= 1
        self.n = math.ceil(self.n / self.eta)
        self.r = int(min(self.r * self.eta, self.max_t_attr))
        self.cumul_r = self.r
        ranked = sorted(self.live, key=lambda t: metric_op * self.live[t][metric])  # type: ignore[index]
        return ranked[-self.n :], ranked[: -self.n]

    def update_trial_stats(self, trial_id: str, result: dict[str, Any]) -> None:
        delta = self._time(result) - self._time(self.live[trial_id])
        if delta <= 0:
            logger.info("HyperBand: trial %s restored from an earlier point in time", trial_id)
        self.completed_progress += delta
        self.live[trial_id] = result

    def cleanup_trial(self, trial_id: str) -> None:
        self.live.pop(trial_id, None)

    def completion_percentage(self) -> float:
        if self.finished():
            return 1.0
        return min(self.completed_progress / self.total_work, 1.0) if self.total_work else 0.0

    def _time(self, result: dict[str, Any] | None) -> float:
        return 0 if result is None else result[self.time_attr]

    def _total_work(self, n: float, r: float, s: int) -> int:
        work, cumulative_r = 0, r
        for _ in range(s + 1):
            work += int(n) * int(r)
            n = math.ceil(n / self.eta)
            r = int(min(r * self.eta, self.max_t_attr - cumulative_r))
        return work

    def __repr__(self) -> str:
        return (
            f"Bracket(max size (n)={self.n}, milestone (r)={self.cumul_r}, "
            f"completed={self.completion_percentage():.1%}, live={len(self.live)})"
        )


class HyperBandScheduler(TrialScheduler):
    """Synchronous HyperBand: brackets of trials, successively halved at milestones.

    New trials fill brackets in order: within a band, bracket ``s = 0, 1, ..., s_max``
    holds up to ``n0(s) = ceil(s_max_1 / (s + 1) * eta**s)`` trials starting with
    ``r0(s) = int(max_t * eta**-s)`` time units, where
    ``s_max_1 = round(log(max_t) / log(eta)) + 1``; a full band starts a new one.

    A trial that reaches its bracket's milestone is PAUSED. Once every live trial of the
    bracket has reached it, the best ``ceil(n / eta)`` get ``TrialSuggestion.resume`` (or
    CONTINUE, for the trial reporting) and the rest STOP (``TrialSuggestion.stop`` for
    paused ones). When the last milestone is done the bracket's trials stop. Exactly Ray's
    ``HyperBandScheduler``, including its milestones (the last one is
    ``min(r * eta, max_t)``, as in Ray 2.60).

    Args:
        time_attr: Monotonically increasing result key measuring progress.
        metric: Result key to optimize (TuneConfig's when None).
        mode: ``"min"`` or ``"max"``.
        max_t: Maximum ``time_attr`` per trial.
        reduction_factor: ``eta``.
        stop_last_trials: Stop trials after the last milestone; if False they keep running.
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        if not max_t > 0:
            raise ConfigError(f"{name}(max_t={max_t!r}): max_t must be > 0, e.g. 81.")
        if not reduction_factor > 1:
            raise ConfigError(
                f"{name}(reduction_factor={reduction_factor!r}): must be > 1, e.g. 3."
            )
        self._time_attr = time_attr
        self._eta = reduction_factor
        self._max_t_attr = max_t
        self._s_max_1 = round(math.log(max_t) / math.log(reduction_factor)) + 1
        self._stop_last_trials = stop_last_trials
        self._hyperbands: list[list[_Bracket | None]] = [[]]
        self._trial_info: dict[str, tuple[_Bracket, int]] = {}
        self._cur_bracket: _Bracket | None = None
        self._band_idx = 0
        self._num_stopped = 0
        self._paused: set[str] = set()
        self._queue: deque[TrialSuggestion] = deque()

    # ---------------------------------------------------------------- geometry

    def bracket_size(self, s: int) -> int:
        """``n0(s)``: the most trials bracket ``s`` takes."""
        return math.ceil(self._s_max_1 / (s + 1) * self._eta**s)

    def bracket_start(self, s: int) -> int:
        """``r0(s)``: the first milestone of bracket ``s``."""
        return int(self._max_t_attr * self._eta ** (-s))

    @property
    def bands(self) -> list[list[_Bracket | None]]:
        """The bands created so far (a None entry is a skipped, too-small bracket)."""
        return self._hyperbands

    # ---------------------------------------------------------------- callbacks

    def on_trial_add(self, trial: Trial) -> None:
        """Puts the trial in the current bracket, opening a new bracket or band if full."""
        cur = self._cur_bracket
        band = self._hyperbands[self._band_idx]
        if cur is None or cur.filled():
            while True:
                if len(band) == self._s_max_1:
                    band = []
                    self._hyperbands.append(band)
                    self._band_idx += 1
                s = len(band)
                if self.bracket_start(s) == 0:
                    logger.info("HyperBand: bracket %d too small, skipping it", s)
                    band.append(None)
                    continue
                cur = _Bracket(
                    self._time_attr,
                    self.bracket_size(s),
                    self.bracket_start(s),
                    self._max_t_attr,
                    self._eta,
                    s,
                    self._stop_last_trials,
                )
                band.append(cur)
                self._cur_bracket = cur
                break
        assert cur is not None
        cur.add_trial(trial.trial_id)
        self._trial_info[trial.trial_id] = (cur, self._band_idx)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        if not self._check_result(result, self._time_attr):
            return CONTINUE
        info = self._trial_info.get(trial.trial_id)
        if info is None or trial.trial_id not in info[0].live:
            return CONTINUE  # not ours (never added, or already cleaned up)
        bracket = info[0]
        self._paused.discard(trial.trial_id)
        bracket.update_trial_stats(trial.trial_id, result)
        if bracket.continue_trial(trial.trial_id):
            return CONTINUE
        return self._process_bracket(bracket, trial.trial_id)

    def on_trial_complete(self, trial: Trial, result: Mapping[str, object] | None) -> None:
        self.on_trial_remove(trial)

    def on_trial_error(self, trial: Trial) -> None:
        self.on_trial_remove(trial)

    def on_trial_remove(self, trial: Trial) -> None:
        """Drops the trial from its bracket; that may complete the bracket's rung."""
        info = self._trial_info.get(trial.trial_id)
        self._paused.discard(trial.trial_id)
        if info is None:
            return
        bracket = info[0]
        bracket.cleanup_trial(trial.trial_id)
        if not bracket.finished():
            self._process_bracket(bracket, None)

    def suggest(self) -> TrialSuggestion | None:
        return self._queue.popleft() if self._queue else None

    # ---------------------------------------------------------------- halving

    def _process_bracket(self, bracket: _Bracket, current: str | None) -> Decision:
        decision = Decision.pause(
            f"reached milestone {self._time_attr}={bracket.cumul_r:g}; waiting for the rest "
            "of its bracket"
        )
        if bracket.cur_iter_done():
            if bracket.finished():
                for tid in list(bracket.live):
                    if tid in self._paused:
                        self._stop_other(bracket, tid, "its HyperBand bracket finished")
                return Decision.stop(f"its HyperBand bracket finished at {bracket.cumul_r:g}")
            milestone = bracket.cumul_r
            good, bad = bracket.successive_halving(self._metric, self._metric_op)  # type: ignore[arg-type]
            self._num_stopped += len(bad)
            reason = (
                f"not in the top {len(good)} of its bracket at milestone "
                f"{self._time_attr}={milestone:g}"
            )
            for tid in bad:
                if tid == current:
                    bracket.cleanup_trial(tid)
                    decision = Decision.stop(reason)
                else:
                    self._stop_other(bracket, tid, reason)
            for tid in good:
                if bracket.continue_trial(tid):
                    if tid == current:
                        decision = CONTINUE
                    elif tid in self._paused:
                        self._paused.discard(tid)
                        self._queue.append(
                            TrialSuggestion.resume(
                                tid,
                                f"in the top {len(good)} at milestone {milestone:g}; continues "
                                f"to {bracket.cumul_r:g}",
                            )
                        )
        if decision.action is Action.PAUSE and current is not None:
            self._paused.add(current)
        return decision

    def _stop_other(self, bracket: _Bracket, trial_id: str, reason: str) -> None:
        bracket.cleanup_trial(trial_id)
        self._paused.discard(trial_id)
        self._queue.append(TrialSuggestion.stop(trial_id, reason))

    def debug_string(self) -> str:
        out = f"Using HyperBand: num_stopped={self._num_stopped} total_brackets=" + str(
            sum(len(b) for b in self._hyperbands)
        )
        for i, band in enumerate(self._hyperbands):
            out += f"\nRound #{i}:" + "".join(f"\n  {b}" for b in band if b is not None)
        return out
