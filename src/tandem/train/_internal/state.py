"""The train controller's states (one run), as an enum whose members say what they mean.

::

    INITIALIZING -> RUNNING -> FINISHED
                       |  \\-> STOPPED          (stop requested)
                       v
                 WORKER_FAILED --(FailurePolicy)--> RESTARTING   -> RUNNING
                                              \\--> RESCHEDULING -> RUNNING | STOPPED
                                               \\-> ERRORED
       RUNNING -> PREEMPTING (workers told; until a checkpoint or the deadline)
                  -> PREEMPTED (gang stopped, re-queued) -> RUNNING | STOPPED | ERRORED
                  -> FINISHED (the run ended meanwhile)
"""

from __future__ import annotations

import enum

from tandem.jobs.spec import JobStatus


class TrainControllerState(enum.Enum):
    INITIALIZING = "INITIALIZING"
    """The run folder is being prepared; no gang yet."""
    RUNNING = "RUNNING"
    """A gang is running; the controller relays its reports."""
    WORKER_FAILED = "WORKER_FAILED"
    """A worker raised or died; the failure policy decides what happens next."""
    RESTARTING = "RESTARTING"
    """The failed gang is gone; a new one starts on the same placement."""
    RESCHEDULING = "RESCHEDULING"
    """A node of the placement was lost; waiting for a new placement for the whole gang."""
    PREEMPTING = "PREEMPTING"
    """The scheduler asked the run to yield: workers see ``get_preemption_info()`` until
    they checkpoint or the deadline passes."""
    PREEMPTED = "PREEMPTED"
    """The gang was stopped for a higher-priority job; waiting in the queue to resume."""
    FINISHED = "FINISHED"
    """Every worker returned."""
    ERRORED = "ERRORED"
    """The run failed (the failure policy raised, or the run was refused)."""
    STOPPED = "STOPPED"
    """Stopped on request."""

    @property
    def is_terminal(self) -> bool:
        """The run is over: nothing runs, nothing will."""
        return self in _TERMINAL

    @property
    def needs_new_gang(self) -> bool:
        """A gang must be started before the run can go on."""
        return self in (TrainControllerState.INITIALIZING, TrainControllerState.RESTARTING,
                        TrainControllerState.RESCHEDULING, TrainControllerState.PREEMPTED)

    @property
    def job_status(self) -> JobStatus:
        """The job status a user sees while (or after) the controller is in this state."""
        return _JOB_STATUS[self]


_TERMINAL = frozenset({TrainControllerState.FINISHED, TrainControllerState.ERRORED,
                       TrainControllerState.STOPPED})
_JOB_STATUS = {
    TrainControllerState.INITIALIZING: JobStatus.RUNNING,
    TrainControllerState.RUNNING: JobStatus.RUNNING,
    TrainControllerState.WORKER_FAILED: JobStatus.RUNNING,
    TrainControllerState.RESTARTING: JobStatus.RESTARTING,
    TrainControllerState.RESCHEDULING: JobStatus.RESTARTING,
    TrainControllerState.PREEMPTING: JobStatus.RUNNING,
    TrainControllerState.PREEMPTED: JobStatus.RESTARTING,
    TrainControllerState.FINISHED: JobStatus.FINISHED,
    TrainControllerState.ERRORED: JobStatus.FAILED,
    TrainControllerState.STOPPED: JobStatus.STOPPED,
}
