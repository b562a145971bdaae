"""``Callback``: the one base class of every callback, and ``CallbackDispatcher``.

A callback in ``RunConfig(callbacks=[...])`` hears a run's events through named hooks,
each a no-op until overridden:

- ``on_run_start(context)`` — the run was submitted; ``context`` says which run and where
  the callback runs (``context.site``);
- ``on_report(rows)`` — rank 0's new report rows (each with ``training_iteration`` and
  ``time_total_s``);
- ``on_checkpoint(entry)`` — a checkpoint was committed: ``(iteration, Checkpoint, metrics)``;
- ``on_end(result)`` — the run is over (its ``Result``, error included).

Each callback runs in exactly one process, the one that drives the run (``site``):

- ``CallbackSite.DRIVER``: the process running the run's controller — the process that
  called ``fit()`` (or the train server, for a run submitted to it);
- ``CallbackSite.WORKER``: a worker that started the run itself (a tuning trial whose
  function fits a Trainer): the callbacks stay in that worker, so they can call
  ``tune.report`` for the trial, and the driver does not run them a second time.

Tuning's experiment callbacks (``tandem.tune.Callback``, with ``on_trial_*`` hooks) and the
1.x ``Trainer``'s ``TrainingCallback`` subclass this class, so one list holds them all.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.records import record

if TYPE_CHECKING:
    from tandem.train.api.result import Result

__all__ = ["Callback", "CallbackDispatcher", "CallbackSite", "RayTrainCallback", "RunCallbackContext",
           "UserCallback"]


class CallbackSite(str, enum.Enum):
    """Where a run's callbacks run (see the module docstring)."""

    DRIVER = "driver"
    WORKER = "worker"

    def __str__(self) -> str:
        return self.value


@record
class RunCallbackContext:
    """What ``Callback.on_run_start`` is told about the run."""

    run_name: str
    run_path: str
    site: CallbackSite
    trial_id: str | None = None
    trial_name: str | None = None


class Callback:
    """Base class of every callback: override the hooks you need (see the module
    docstring for when each is called and where). Hooks run on the thread that follows
    the run and must return quickly; an exception raised by a hook fails the run."""

    def check_run(self) -> None:
        """Called by ``train.submit`` (so by ``fit()``) in the submitting process, before
        the run is queued: raise ``ConfigError`` to refuse a run this callback cannot serve
        (tandem's tuning loggers do: they only log a Tuner's trials)."""

    def on_run_start(self, context: RunCallbackContext) -> None:
        """The run was submitted (before its workers start)."""

    def on_report(self, rows: list[dict[str, object]]) -> None:
        """Rank 0's new report rows, in order."""

    def on_checkpoint(self, entry: tuple[int, object, dict[str, object]]) -> None:
        """A checkpoint was committed: ``(iteration, Checkpoint, metrics)``."""

    def on_end(self, result: Result) -> None:
        """The run is over; ``result.error`` is set if it failed."""


#: Ray's ``RayTrainCallback``, the base of every run callback (``UserCallback`` included):
#: tandem's :class:`Callback`, which ``RunConfig(callbacks=[...])`` checks for, as Ray's does.
RayTrainCallback = Callback


class UserCallback(Callback):
    """Ray Train V2's ``UserCallback``: override ``after_report`` and ``after_exception``.

    Both run in the process that drives the run (``CallbackSite.DRIVER``). ``run_context``
    is the run's :class:`RunCallbackContext` (tandem's counterpart of Ray's
    ``TrainRunContext``: the run's name, folder, trial). A ``UserCallback`` is a
    :class:`Callback`, so the other hooks are there too.
    """

    def after_report(self, run_context: RunCallbackContext, metrics: list[dict[str, Any]],
                     checkpoint: Any) -> None:
        """Called once every worker has reported an iteration: ``metrics[i]`` is what
        worker ``i`` reported; ``checkpoint`` is the checkpoint committed with it (already
        in the run's storage), or None."""

    def after_exception(self, run_context: RunCallbackContext,
                        worker_exceptions: dict[int, Exception]) -> None:
        """Called when workers failed: the exception raised by each failed worker, by
        world rank (a worker that died without raising maps to a ``RuntimeError``)."""


class CallbackDispatcher:
    """Calls one event on every callback, in order. The only place run events are
    dispatched: the train controller owns one (``site=DRIVER``), and a job submitted from
    a worker owns one there (``site=WORKER``) instead."""

    def __init__(self, callbacks: Sequence[Callback], site: CallbackSite) -> None:
        self.callbacks: tuple[Callback, ...] = tuple(callbacks)
        self.site = site

    def __bool__(self) -> bool:
        return bool(self.callbacks)

    def run_start(self, run_name: str, run_path: str, trial_id: str | None = None,
                  trial_name: str | None = None) -> None:
        if not self.callbacks:
            return
        context = RunCallbackContext(run_name, run_path, self.site, trial_id, trial_name)
        for cb in self.callbacks:
            cb.on_run_start(context)

    def report(self, rows: list[dict[str, object]]) -> None:
        for cb in self.callbacks:
            cb.on_report(rows)

    def checkpoint(self, entry: tuple[int, object, dict[str, object]]) -> None:
        for cb in self.callbacks:
            cb.on_checkpoint(entry)

    def end(self, result: Result) -> None:
        for cb in self.callbacks:
            cb.on_end(result)


def check_callbacks(callbacks: Sequence[object] | None, what: str) -> None:
    """Raises ``ConfigError`` for a callback that is not a ``Callback``."""
    from tandem._core.errors import ConfigError

    if callbacks is None:
        return
    if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Sequence):
        raise ConfigError(f"{what}(callbacks=...) takes a list of callbacks, got "
                          f"{type(callbacks).__name__}.")
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise ConfigError(
                f"{what}(callbacks=[...]) got {type(cb).__name__} {cb!r:.60}, which is not a "
                f"callback: subclass tandem.train.Callback (hooks on_run_start, on_report, "
                f"on_checkpoint, on_end) or tandem.tune.Callback (on_trial_* hooks) and "
                f"override the hooks you need."
            )
