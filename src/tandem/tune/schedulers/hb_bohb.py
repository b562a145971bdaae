# Adapted from Ray (https://github.com/ray-project/ray), python/ray/tune/schedulers/hb_bohb.py
# (Ray 2.60). Copyright 2023 The Ray Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0). Modified for tandem: decisions are returned
# values; the controller tells the searcher of pauses (Searcher.on_pause / on_unpause).
"""``HyperBandForBOHB``: HyperBand without pipelining, for :class:`~tandem.tune.search.bohb.TuneBOHB`."""

from __future__ import annotations

import logging
from typing import Any

from tandem._core.errors import ConfigError
from tandem.tune.schedulers.base import CONTINUE, Decision, TrialSuggestion
from tandem.tune.schedulers.hyperband import HyperBandScheduler, _Bracket
from tandem.tune.trial import Trial, TrialStatus

__all__ = ["HyperBandForBOHB"]

logger = logging.getLogger(__name__)


class HyperBandForBOHB(HyperBandScheduler):
    """Extends HyperBand early stopping for BOHB (Ray's ``HyperBandForBOHB``).

    Two changes to :class:`HyperBandScheduler`, as in Ray:

    1. Trials are placed so that the bracket with the largest size is filled first.
    2. Trials pause at a milestone even if their bracket is not filled, so that BOHB can
       insert new trials; a bracket is halved once all its trials wait at the milestone,
       or, when no trial is running or waiting to start, with the trials it has.

    Every result gets ``result["hyperband_info"]`` (with ``"budget"``, the milestone, once a
    trial reaches one), which :class:`TuneBOHB` learns from. The controller tells the
    searcher of each pause and resume (``on_pause`` / ``on_unpause``), so TuneBOHB counts
    paused trials out of its concurrency.

    Args: as :class:`HyperBandScheduler`.
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
        super().__init__(time_attr, metric, mode, max_t, reduction_factor, stop_last_trials)
        self._trials: dict[str, Trial] = {}

    def on_trial_add(self, trial: Trial) -> None:
        """Adds a trial: to the current bracket unless it is filled; a new bracket gets the
        largest ``s`` left in the band (Ray's "largest bracket first")."""
        if not self._metric or not self._mode:
            raise ConfigError(
                f"{type(self).__name__} has been instantiated without a valid `metric` "
                f"({self._metric}) or `mode` ({self._mode}) parameter. Either pass these "
                "parameters when instantiating the scheduler, or pass them as parameters to "
                "`tune.TuneConfig()`"
            )
        self._trials[trial.trial_id] = trial
        cur = self._cur_bracket
        band = self._hyperbands[self._band_idx]
        if cur is None or cur.filled():
            while True:
                if len(band) >= self._s_max_1:
                    band = []
                    self._hyperbands.append(band)
                    self._band_idx += 1
                s = self._s_max_1 - len(band) - 1
                if self.bracket_start(s) == 0:
                    logger.debug("BOHB: Bracket too small - Retrying...")
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
        result["hyperband_info"] = {}
        if not self._check_result(result, self._time_attr):
            return CONTINUE
        info = self._trial_info.get(trial.trial_id)
        if info is None or trial.trial_id not in info[0].live:
            return CONTINUE
        bracket = info[0]
        self._paused.discard(trial.trial_id)
        bracket.update_trial_stats(trial.trial_id, result)
        if bracket.continue_trial(trial.trial_id):
            return CONTINUE
        result["hyperband_info"]["budget"] = bracket.cumul_r
        others_waiting = all(
            tid in self._paused for tid in bracket.live if tid != trial.trial_id
        )
        if not bracket.filled() or not others_waiting:
            self._paused.add(trial.trial_id)
            return Decision.pause(
                f"reached milestone {self._time_attr}={bracket.cumul_r:g}; BOHB waits for "
                "the rest of its bracket"
            )
        return self._process_bracket(bracket, trial.trial_id)

    def on_trial_remove(self, trial: Trial) -> None:
        # Ray's HyperBandForBOHB halves only when a trial reports or nothing runs; a
        # removed trial just leaves its bracket
        info = self._trial_info.get(trial.trial_id)
        self._paused.discard(trial.trial_id)
        if info is not None:
            info[0].cleanup_trial(trial.trial_id)

    def suggest(self) -> TrialSuggestion | None:
        """Queued resumes/stops first; when no trial is running or about to start, the
        first bracket with paused trials is halved with the trials it has (Ray's
        ``choose_trial_to_run``)."""
        if self._queue:
            return self._queue.popleft()
        busy = any(
            t.status in (TrialStatus.RUNNING, TrialStatus.PENDING)
            for tid, t in self._trials.items()
            if tid not in self._paused
        )
        if busy:
            return None
        for band in self._hyperbands:
            for bracket in band:
                if bracket is None or not any(t in self._paused for t in bracket.live):
                    continue
                logger.debug("Processing bracket since no trial is running.")
                # every live trial of the bracket waits at the milestone: halve now
                for tid in bracket.live:
                    if bracket._time(bracket.live[tid]) < bracket.cumul_r:
                        break
                else:
                    self._process_bracket(bracket, None)
                    if self._queue:
                        return self._queue.popleft()
        return None
