"""``TuneTrial``: a Tune trial plus what the controller needs to run it (its job, folder,
last result). Its own module, below the controller, so that callbacks, progress displays
and integrations can name it without importing the controller."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tandem.tune.trial import Trial

if TYPE_CHECKING:
    from tandem.jobs.contract import JobView
    from tandem.train.api.result import Result


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
    )

    def __init__(self, trial_id: str, config: dict, *, name: str, path: str, index: int,
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
