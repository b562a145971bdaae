"""The trial record the tune controller keeps for every configuration it runs.

Ownership: the controller creates and mutates ``Trial`` objects. Schedulers and searchers
receive them and must treat them as read-only: they may read ``status``, ``config``,
``checkpoint`` and ``last_result`` but never assign to them. A scheduler that wants a trial
changed returns a :class:`~tandem.tune.schedulers.Decision` and the controller acts on it.
"""

from __future__ import annotations

import enum
from typing import Any


class TrialStatus(enum.Enum):
    """Lifecycle of a trial: ``PENDING -> RUNNING <-> PAUSED -> TERMINATED | ERROR``.

    ``PENDING`` means created but not running (no process and no resources held);
    ``PAUSED`` means it ran, stopped at a scheduler's request and may be resumed from its
    latest checkpoint.
    """

    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    @property
    def is_terminal(self) -> bool:
        """True once the trial will never run again."""
        return self is TrialStatus.TERMINATED or self is TrialStatus.ERROR

    @property
    def is_live(self) -> bool:
        """True while the trial may still run (pending, running or paused)."""
        return not self.is_terminal


class Trial:
    """One configuration being evaluated; controller-owned and mutable.

    Kept deliberately small (``__slots__``, no per-trial history) so that a controller can
    hold tens of thousands of them; the full result history lives on disk.

    Attributes:
        trial_id: Unique id within the experiment.
        config: The resolved configuration (no search-space objects left in it).
        status: Current :class:`TrialStatus`.
        last_result: The latest result dict reported, or None before the first report.
        checkpoint: The latest persisted checkpoint (an object with a ``.path``), or None.
            The controller updates it *before* passing the result that came with it to the
            scheduler, so that a scheduler reading it sees the checkpoint of that result.
        experiment_tag: Short human-readable description, e.g. ``"3_lr=0.01,bs=32"``.
        resources: Resources per worker asked for this trial, or None for the default.
        num_failures: How many times the trial failed and was restarted.
    """

    __slots__ = (
        "checkpoint",
        "config",
        "experiment_tag",
        "last_result",
        "num_failures",
        "resources",
        "status",
        "trial_id",
    )

    def __init__(
        self,
        trial_id: str,
        config: dict[str, Any],
        *,
        experiment_tag: str = "",
        resources: dict[str, float] | None = None,
        status: TrialStatus = TrialStatus.PENDING,
        checkpoint: Any = None,
    ) -> None:
        self.trial_id = trial_id
        self.config = config
        self.status = status
        self.last_result: dict[str, Any] | None = None
        self.checkpoint = checkpoint
        self.experiment_tag = experiment_tag
        self.resources = resources
        self.num_failures = 0

    @property
    def placement_group_factory(self) -> Any:
        """The trial's resources as a ``PlacementGroupFactory`` (Ray's attribute); one CPU
        when none were given."""
        from tandem.tune.execution.placement_groups import as_placement_group_factory

        return as_placement_group_factory(self.resources)

    def is_finished(self) -> bool:
        """True if the trial is TERMINATED or ERROR."""
        return self.status.is_terminal

    def __repr__(self) -> str:
        return f"Trial({self.trial_id!r}, {self.status.value})"

    def __getstate__(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        for name, value in state.items():
            setattr(self, name, value)
