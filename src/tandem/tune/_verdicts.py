"""Which reports of a trial wait for the tuner's verdict (issue 25, item 3).

A trial whose stopper or scheduler can decide at any result waits, after a report, for the
tuner's verdict on it, so that a stop decided at iteration N leaves exactly N rows. That
wait is a round trip per report (worker -> driver -> tuner, and across a train server to
its client and back). Most reports cannot change anything: a stop criterion
``{"training_iteration": 100}`` can fire only at 100, ASHA decides only where a trial
reaches a rung. For those policies the tuner tells rank 0 in advance which reports may
decide (a :class:`~tandem.train.context.VerdictGate`); the others go on at once. A policy
whose decisions cannot be told in advance (a function stopper, a custom scheduler, a
callback that may change a result) keeps a verdict per report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from tandem.train.context import VerdictGate
from tandem.tune.callback import Callback, LoggerCallback, TBXLoggerCallback
from tandem.tune.schedulers.asha import ASHAScheduler
from tandem.tune.schedulers.base import TrialScheduler
from tandem.tune.schedulers.fifo import FIFOScheduler
from tandem.tune.stopper import (
    CombinedStopper,
    DictStopper,
    MaximumIterationStopper,
    NoopStopper,
    Stopper,
)

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial

#: A trial's gate: ``True`` = every report waits.
Gate = VerdictGate | bool
GateOf = Callable[[Any], Gate]


def verdict_gate(stopper: object, scheduler: TrialScheduler, callbacks: Sequence[Callback],
                 strict_metric: Any) -> GateOf | None:
    """``trial -> gate`` for the trials of a tuner, or None when no report needs a verdict
    (no stopper, FIFO, no callback that may change a result)."""
    stop = _stopper_gate(stopper) if stopper is not None else _never
    sched = _scheduler_gate(scheduler)
    if stop is _never and sched is _never:
        return None  # nothing decides at a result (a callback's checkpoint: see Tuner.fit)
    if stop is None or sched is None or any(_may_change_results(cb) for cb in callbacks):
        return lambda trial: True
    required: tuple[str, ...] = ()
    if strict_metric is not None:  # a result without it ends the experiment: at that result
        required = tuple(strict_metric) if isinstance(strict_metric, (list, tuple)) else (
            strict_metric,)

    def gate(trial: object) -> Gate:
        a, b = stop(trial), sched(trial)
        if a is True or b is True:
            return True
        assert isinstance(a, VerdictGate) and isinstance(b, VerdictGate)
        return a.merged(b).merged(VerdictGate(required=required))

    return gate


def _never(trial: object) -> Gate:
    return VerdictGate()


def _may_change_results(cb: Callback) -> bool:
    """A callback that may set ``result["should_checkpoint"]`` or change a result a stopper
    then reads: every report waits. Loggers only read."""
    if isinstance(cb, (LoggerCallback, TBXLoggerCallback)):
        return False
    return type(cb).on_trial_result is not Callback.on_trial_result


def _stopper_gate(stopper: Any) -> GateOf | None:
    """None: the stopper may decide at any result (a function, a plateau, ...)."""
    kind = type(stopper)
    if kind is NoopStopper:
        return _never
    if kind is DictStopper:
        # stops where result[key] >= value (or done): a key never reported never stops, but
        # the worker cannot tell a key the driver adds (it then asks)
        pairs = tuple(stopper.criteria.items())
        return lambda trial: VerdictGate(at_least=pairs)
    if kind is MaximumIterationStopper:
        # counts the trial's results across its jobs: this job may go on until the rest
        def rows(trial: TuneTrial) -> Gate:
            left = stopper._max_iter - stopper._iter.get(trial.trial_id, 0)
            return VerdictGate(rows=max(1, left))
        return rows
    if kind is CombinedStopper:
        parts = [_stopper_gate(s) for s in stopper._stoppers if s is not None]
        if any(p is None for p in parts):
            return None

        def combined(trial: object) -> Gate:
            out = VerdictGate()
            for p in parts:
                assert p is not None
                g = p(trial)
                if g is True:
                    return True
                assert isinstance(g, VerdictGate)
                out = out.merged(g)
            return out
        return combined
    if kind is Stopper:
        return _never
    if getattr(stopper, "trial_local", False) is True:
        try:
            _pickled(stopper)
        except Exception:  # noqa: BLE001 - it cannot travel: every report waits
            return None

        def local(trial: object) -> Gate:
            # a copy runs next to the trial (VerdictGate.local), taken now: it holds what
            # the stopper learned of this trial so far (a restarted trial goes on from there)
            try:
                return VerdictGate(local=(_pickled(stopper),))
            except Exception:  # noqa: BLE001
                return True
        return local
    return None


def _pickled(stopper: Stopper) -> bytes:
    import cloudpickle

    return cloudpickle.dumps(stopper)


def _scheduler_gate(scheduler: TrialScheduler) -> GateOf | None:
    kind = type(scheduler)
    if kind.on_trial_result is FIFOScheduler.on_trial_result:
        return _never
    if kind is ASHAScheduler:
        assert isinstance(scheduler, ASHAScheduler)
        return _asha_gate(scheduler)
    return None


def _asha_gate(s: ASHAScheduler) -> GateOf:
    """ASHA decides at a result that reaches a rung not yet judged for the trial (one rung
    per result) and, with ``stop_last_trials``, at ``max_t``; a result without
    ``time_attr`` or the metric is not judged (it asks, all the same)."""
    time_attr = s._time_attr
    milestones = tuple(sorted({m for b in s.brackets for m in b.milestones}))
    at_least = ((time_attr, s._max_t),) if s._stop_last_trials else ()
    metric = s.metric
    required = (time_attr,) + ((metric,) if metric is not None else ())
    gate = VerdictGate(at_least=at_least, milestones=(time_attr, milestones),
                       milestone_score=metric, required=required)
    return lambda trial: gate
