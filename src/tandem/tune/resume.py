"""``ResumeConfig``: which trials ``Tuner.restore`` continues, restarts or skips (Ray Tune's
``ray.tune.ResumeConfig``, passed as ``Tuner.restore(path, trainable,
_resume_config=ResumeConfig(...))``; ``resume_config=`` is accepted too)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.tune.trial import TrialStatus

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial


@record(frozen=False)
class ResumeConfig:
    """How to resume the trials of a restored experiment, by the state they were left in.

    Args:
        finished: Trials that had ended (TERMINATED): ``SKIP`` (default: kept as they are),
            ``RESUME`` (run again from their latest checkpoint) or ``RESTART`` (from the
            start, without a checkpoint; their folder is emptied).
        unfinished: Trials that were pending, running or paused: ``RESUME`` by default.
        errored: Trials that had failed: ``SKIP`` by default (they stay errored).

    Each takes a ``ResumeConfig.ResumeType`` or its value (``"resume"``, ``"restart"``,
    ``"skip"``).
    """

    class ResumeType(Enum):
        """RESUME: from the latest checkpoint. RESTART: from the beginning (no checkpoint).
        SKIP: treated as ended (an errored trial stays errored)."""

        RESUME = "resume"
        RESTART = "restart"
        SKIP = "skip"

    finished: Any = ResumeType.SKIP
    unfinished: Any = ResumeType.RESUME
    errored: Any = ResumeType.SKIP

    def __post_init__(self) -> None:
        allowed = [t.value for t in ResumeConfig.ResumeType]
        for name in ("finished", "unfinished", "errored"):
            value = getattr(self, name)
            if isinstance(value, ResumeConfig.ResumeType):
                continue
            if isinstance(value, str) and value.lower() in allowed:
                setattr(self, name, ResumeConfig.ResumeType(value.lower()))
                continue
            raise ConfigError(
                f"ResumeConfig({name}={value!r}) is invalid: use ResumeConfig.ResumeType."
                f"RESUME, RESTART or SKIP (or {', '.join(repr(a) for a in allowed)})."
            )

    @classmethod
    def from_flags(cls, resume_unfinished: bool = True, resume_errored: bool = False,
                   restart_errored: bool = False) -> ResumeConfig:
        """The config ``Tuner.restore``'s ``resume_*`` / ``restart_errored`` flags mean."""
        rt = cls.ResumeType
        errored = rt.RESUME if resume_errored else rt.RESTART if restart_errored else rt.SKIP
        return cls(unfinished=rt.RESUME if resume_unfinished else rt.SKIP, errored=errored)


def requeue_trials(trials: Iterable[TuneTrial], config: ResumeConfig,
                   wipe: Callable[[str], None]) -> None:
    """Sets each restored trial's state as ``config`` says (as Ray's controller does when
    it requeues restored trials); ``wipe(path)`` empties a restarted trial's folder."""
    rt = ResumeConfig.ResumeType
    for t in trials:
        if t.status is TrialStatus.ERROR:
            how = config.errored
        elif t.status is TrialStatus.TERMINATED:
            how = config.finished
        else:  # PENDING, RUNNING, PAUSED
            how = config.unfinished
        if how is rt.RESUME:
            t.status, t.error = TrialStatus.PENDING, None
        elif how is rt.RESTART:
            t.status, t.error = TrialStatus.PENDING, None
            t.checkpoint, t.last_result = None, None
            wipe(t.path)
        elif t.status is not TrialStatus.ERROR:  # SKIP: ended; an errored trial stays so
            t.status = TrialStatus.TERMINATED
