"""The trial record the tune controller keeps for every configuration it runs.

Ownership: the controller creates and mutates ``Trial`` objects. Schedulers and searchers
receive them and must treat them as read-only: they may read ``status``, ``config``,
``checkpoint`` and ``last_result`` but never assign to them. A scheduler that wants a trial
changed returns a :class:`~tandem.tune.schedulers.Decision` and the controller acts on it.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tandem.jobs.contract import JobView
    from tandem.train.api.result import Result


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

    Built as Ray's ``Trial(trainable_name, *, config=..., trial_id=..., ...)``; the
    controller makes them (callbacks, schedulers and searchers receive them).

    Attributes:
        trainable_name: The name of the trainable the trial runs.
        trial_id: Unique id within the experiment (``Trial.generate_id()`` when not given).
        config: The resolved configuration (no search-space objects left in it).
        status: Current :class:`TrialStatus`.
        last_result: The latest result dict reported, or None before the first report.
        checkpoint: The latest persisted checkpoint (an object with a ``.path``), or None;
            ``restore_path`` sets the first one. The controller updates it *before* passing
            the result that came with it to the scheduler, so that a scheduler reading it
            sees the checkpoint of that result.
        experiment_tag: Short human-readable description, e.g. ``"3_lr=0.01,bs=32"``.
        resources: Resources per worker asked for this trial (``placement_group_factory``),
            or None for the default.
        num_failures: How many times the trial failed and was restarted.
        evaluated_params: The sampled parameters of ``config`` (Ray's: what the search
            varied).
        stopping_criterion: ``{metric: value}``: :meth:`should_stop` is true for a result
            where one is reached (or ``done``).
        checkpoint_config: The ``CheckpointConfig`` the trial's checkpoints follow
            (``checkpoint_freq`` / ``checkpoint_at_end`` read it).
        log_to_file: ``(stdout_file, stderr_file)``, as Ray normalises it.
        max_failures: :meth:`should_recover` allows this many failures (-1: any).
    """

    __slots__ = (
        "checkpoint",
        "checkpoint_config",
        "config",
        "custom_dirname",
        "custom_trial_name",
        "evaluated_params",
        "experiment_tag",
        "export_formats",
        "last_result",
        "log_to_file",
        "max_failures",
        "num_failures",
        "resources",
        "restore_path",
        "status",
        "stopping_criterion",
        "storage",
        "stub",
        "trainable_name",
        "trial_dirname_creator",
        "trial_id",
        "trial_name_creator",
    )

    PENDING = TrialStatus.PENDING
    RUNNING = TrialStatus.RUNNING
    PAUSED = TrialStatus.PAUSED
    TERMINATED = TrialStatus.TERMINATED
    ERROR = TrialStatus.ERROR

    def __init__(
        self,
        trainable_name: str,
        *,
        config: dict[str, Any] | None = None,
        trial_id: str | None = None,
        storage: Any = None,
        evaluated_params: dict[str, Any] | None = None,
        experiment_tag: str = "",
        placement_group_factory: Any = None,
        stopping_criterion: dict[str, float] | None = None,
        checkpoint_config: Any = None,
        export_formats: list[str] | None = None,
        restore_path: str | None = None,
        trial_name_creator: Callable[[Trial], str] | None = None,
        trial_dirname_creator: Callable[[Trial], str] | None = None,
        log_to_file: str | tuple[str | None, str | None] | None = None,
        max_failures: int = 0,
        stub: bool = False,
        resources: Any = None,
        status: TrialStatus = TrialStatus.PENDING,
        checkpoint: Any = None,
    ) -> None:
        """As Ray's ``Trial.__init__``; ``resources`` (tandem's spelling of
        ``placement_group_factory``), ``status`` and ``checkpoint`` set those attributes.

        Raises:
            TypeError: ``trainable_name`` is not a string.
            ValueError: ``trial_dirname_creator`` returned a name with ``/`` in it.
        """
        if not isinstance(trainable_name, str):
            raise TypeError(
                f"Trial(trainable_name={trainable_name!r}): the first argument is the name "
                f"of the trainable (a str), as in Ray; pass the id and config as keywords: "
                f"Trial('my_fn', trial_id='t1', config={{...}})."
            )
        self.stub = stub
        self.trainable_name = trainable_name
        self.trial_id = Trial.generate_id() if trial_id is None else trial_id
        self.config = config if config is not None else {}
        self.storage = storage
        self.evaluated_params = evaluated_params or {}
        self.experiment_tag = experiment_tag
        self.stopping_criterion = stopping_criterion or {}
        self.resources = resources if resources is not None else placement_group_factory
        self.checkpoint_config = checkpoint_config
        self.export_formats = export_formats
        if not log_to_file or isinstance(log_to_file, str) or len(log_to_file) != 2:
            log_to_file = (None, None)  # as Ray: `stdout_file, stderr_file = log_to_file`
        self.log_to_file = tuple(log_to_file)
        self.max_failures = max_failures
        self.status = status
        self.last_result: dict[str, Any] | None = None
        self.restore_path = restore_path
        if checkpoint is None and restore_path:
            from tandem.train.api.checkpoint import Checkpoint

            checkpoint = Checkpoint.from_directory(restore_path)  # the trial starts from it
        self.checkpoint = checkpoint
        self.num_failures = 0
        self.trial_name_creator = trial_name_creator
        self.trial_dirname_creator = trial_dirname_creator
        self.custom_trial_name = trial_name_creator(self) if trial_name_creator else None
        self.custom_dirname = trial_dirname_creator(self) if trial_dirname_creator else None
        if self.custom_dirname is not None and "/" in self.custom_dirname:
            raise ValueError(f"Trial dirname must not contain '/'. Got {self.custom_dirname}")

    @classmethod
    def generate_id(cls) -> str:
        """A fresh trial id (8 hex digits), as Ray's."""
        return uuid.uuid4().hex[:8]

    @property
    def placement_group_factory(self) -> Any:
        """The trial's resources as a ``PlacementGroupFactory`` (Ray's attribute); one CPU
        when none were given."""
        from tandem.tune.execution.placement_groups import as_placement_group_factory

        return as_placement_group_factory(self.resources)

    @property
    def checkpoint_freq(self) -> int:
        """``checkpoint_config.checkpoint_frequency`` (0 without one)."""
        return int(getattr(self.checkpoint_config, "checkpoint_frequency", 0) or 0)

    @property
    def checkpoint_at_end(self) -> bool:
        """``checkpoint_config.checkpoint_at_end`` (False without one)."""
        return bool(getattr(self.checkpoint_config, "checkpoint_at_end", False))

    def should_stop(self, result: dict[str, Any]) -> bool:
        """Whether ``result`` meets the trial's ``stopping_criterion`` (or says ``done``),
        as Ray's: a criterion the result lacks does not stop it."""
        if result.get("done"):
            return True
        for criterion, stop_value in self.stopping_criterion.items():
            if isinstance(criterion, dict):
                raise ValueError(
                    "Stopping criteria is now flattened by default. "
                    "Use forward slashes to nest values `key1/key2/key3`."
                )
            if criterion in result and result[criterion] >= stop_value:
                return True
        return False

    def should_recover(self) -> bool:
        """Whether the trial may be retried after ``num_failures`` failures
        (``max_failures``; -1 allows any), as Ray's."""
        return self.num_failures <= self.max_failures or self.max_failures < 0

    def is_finished(self) -> bool:
        """True if the trial is TERMINATED or ERROR."""
        return self.status.is_terminal

    def __str__(self) -> str:
        if self.custom_trial_name:
            return self.custom_trial_name
        return f"{self.trainable_name}_{self.trial_id}".replace("/", "_")

    def __repr__(self) -> str:
        return f"Trial({self.trial_id!r}, {self.status.value})"

    def __getstate__(self) -> dict[str, Any]:
        # every class's slots (a subclass's __slots__ holds only its own names)
        return {name: getattr(self, name) for cls in type(self).__mro__
                for name in getattr(cls, "__slots__", ()) if hasattr(self, name)}

    def __setstate__(self, state: Mapping[str, object]) -> None:
        for name, value in state.items():
            setattr(self, name, value)


class TuneTrial(Trial):
    """A trial plus what the controller needs to run it."""

    __slots__ = (
        "action",
        "decisions",
        "error",
        "gang_reports",
        "gen",
        "index",
        "job",
        "job_state",
        "name",
        "path",
        "result",
        "time_total_s",
        "unfinished_status",
    )

    def __init__(self, trial_id: str, config: dict[str, Any], *, name: str, path: str, index: int,
                 experiment_tag: str = "", resources: Any = None,
                 trainable_name: str = "") -> None:
        super().__init__(trainable_name, config=config, trial_id=trial_id,
                         experiment_tag=experiment_tag, resources=resources, stub=True)
        self.name = name
        self.path = path
        self.index = index
        self.job: JobView | None = None
        self.job_state: str | None = None  # how its last job ended (experiment_state.json)
        self.gen = 0
        self.gang_reports = 0  # reports seen from the trial's current job
        self.action: Any = None  # the decision being carried out while its job ends
        self.error: BaseException | None = None
        self.time_total_s = 0.0
        self.result: Result | None = None
        # the status it had when the experiment stopped it (interrupted, fail_fast, a
        # stopper's stop_all, an error): experiment_state.json records that one, so
        # Tuner.restore resumes it, as Ray's saved state does
        self.unfinished_status: TrialStatus | None = None
        # scheduler decisions other than CONTINUE, for the dashboard's learning curves
        self.decisions: list[dict[str, Any]] = []

    @property
    def dirname(self) -> str:
        """The trial's folder name in the experiment folder."""
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    def __str__(self) -> str:
        return self.name  # Ray's str(trial) is its name, what trial_name_creator sets

    @property
    def iteration(self) -> int:
        return int((self.last_result or {}).get("training_iteration", 0))

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state.update(job=None, action=None, result=None)  # live handles stay in this process
        return state
