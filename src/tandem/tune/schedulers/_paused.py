"""Bookkeeping shared by schedulers that pause trials to let waiting ones run."""

from __future__ import annotations

from collections.abc import Callable

from tandem.tune.schedulers.base import TrialSuggestion
from tandem.tune.trial import Trial, TrialStatus


class PausedTrials:
    """Trials a scheduler knows, and those it paused and will resume.

    Ray's FIFO rule: a paused trial is resumed only when no known trial is PENDING, so
    waiting trials get their turn first. Trials are read, never changed.
    """

    __slots__ = ("_known", "_paused")

    def __init__(self) -> None:
        self._known: dict[str, Trial] = {}
        self._paused: dict[str, Trial] = {}

    def add(self, trial: Trial) -> None:
        self._known[trial.trial_id] = trial

    def remove(self, trial: Trial) -> None:
        self._known.pop(trial.trial_id, None)
        self._paused.pop(trial.trial_id, None)

    def mark_paused(self, trial: Trial) -> None:
        self._paused[trial.trial_id] = trial

    def __contains__(self, trial_id: object) -> bool:
        return trial_id in self._paused

    def others_waiting(self, trial: Trial) -> bool:
        """True if a known trial other than ``trial`` is PENDING or PAUSED."""
        return any(
            t is not trial and t.status in (TrialStatus.PENDING, TrialStatus.PAUSED)
            for t in self._known.values()
        ) or any(tid != trial.trial_id for tid in self._paused)

    def next_resume(
        self, key: Callable[[Trial], float] | None = None, reason: str = ""
    ) -> TrialSuggestion | None:
        """A resume suggestion for a paused trial, once no known trial is PENDING.

        Only a trial whose status is already PAUSED is suggested: one the scheduler just
        decided to pause is still RUNNING until its job has stopped, and the controller
        ignores a resume for it, so handing it out then would lose it (it would stay
        paused for ever and the experiment would never end).
        """
        if not self._paused:
            return None
        if any(t.status is TrialStatus.PENDING for t in self._known.values()):
            return None
        candidates = [t for t in self._paused.values() if t.status is TrialStatus.PAUSED]
        if not candidates:
            return None
        trial = min(candidates, key=key) if key is not None else candidates[0]
        del self._paused[trial.trial_id]
        return TrialSuggestion.resume(trial.trial_id, reason)
