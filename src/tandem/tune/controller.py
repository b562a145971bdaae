"""``TuneController``: turns a search space into trials and runs each trial as a train job.

Policies decide, the controller acts: the searcher proposes configs, the trial scheduler
returns decisions (continue, stop, pause, restart from a checkpoint with a new config);
the controller submits, stops and re-submits train jobs to the one job service. A trial
waiting for resources is a queued job: it holds no process and no resources. Only a few
trials are queued at a time, so adaptive searchers see fresh results.

It is built from four frozen settings objects: ``TrialSearch`` (searcher, scheduler, how
many trials, the metric), ``TrialLimits`` (concurrency, stopper, time budget, fail-fast),
``ExperimentOutput`` (folder, trial names, callbacks, progress display) and ``TrialJobs``
(how a trial's job is launched and what it holds); ``Resumed`` when ``Tuner.restore``
takes an experiment up again.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, assert_never

import cloudpickle

from tandem._core.errors import ConfigError, TandemError
from tandem.jobs.contract import JobView
from tandem.jobs.events import (
    Asked,
    Checkpointed,
    JobEvent,
    JobListener,
    RankReported,
    Reported,
    StatusChanged,
)
from tandem.jobs.spec import JobCall, JobStatus
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.files import join_path, make_dirs, write_file
from tandem.train.api.result import Result
from tandem.train.stream import (
    STREAM_CHECKPOINT_KEY,
    STREAM_CHECKPOINT_ONLY,
    STREAM_RUN_KEY,
    StreamOutcome,
)
from tandem.tune.result import SHOULD_CHECKPOINT
from tandem.tune.schedulers.base import Action, TrialScheduler
from tandem.tune.search.searcher import Searcher
from tandem.tune.trial import TrialStatus, TuneTrial

if TYPE_CHECKING:
    from tandem.tune.callback import Callback
    from tandem.tune.progress import ProgressReporter, UserReporterDisplay

logger = logging.getLogger(__name__)

STATE_FILE = "experiment_state.json"
SEARCHER_FILE = "searcher_state.pkl"
SCHEDULER_FILE = "scheduler_state.pkl"


class TuneError(TandemError, RuntimeError):
    """The experiment as a whole cannot go on (e.g. a metric the scheduler needs is missing)."""


@dataclass(frozen=True)
class TrialSearch:
    """What the experiment tries: where configs come from, how many, the scheduler that
    decides on results, and the metric they are judged by."""

    searcher: Searcher
    scheduler: TrialScheduler
    #: trials to create (``TuneConfig(num_samples=-1)``: 10**12, until the searcher ends)
    num_samples: int
    #: the searcher says when it is done (``Searcher.FINISHED``) instead of num_samples
    searcher_counts: bool
    metric: str | None
    mode: str | None
    #: a metric every result must hold (the scheduler's or searcher's): else TuneError
    strict_metric: str | list[str] | None = None


@dataclass(frozen=True)
class TrialLimits:
    """When trials start and when the experiment stops."""

    max_concurrent_trials: int | None = None
    #: ``stopper(trial_id, result) -> bool`` (and ``stop_all()``), or None
    stopper: Any = None
    time_budget_s: float | None = None
    #: ``FailureConfig(fail_fast=...)``: True, False or "RAISE"
    fail_fast: bool | str = False
    #: how many trials' jobs may wait in the service's queue at once (at least 1)
    queue_depth: int = 2


@dataclass(frozen=True)
class ExperimentOutput:
    """Where the experiment lives, how its trials are named, and who is told about it."""

    experiment_path: str
    name_prefix: str  # a trial's name is "<name_prefix>_<exp_uid>_<index>" by default
    exp_uid: str
    reporter: ProgressReporter | UserReporterDisplay  # the progress display
    callbacks: tuple[Callback, ...] = ()  # in the order they are told
    trial_name_creator: Callable[[Any], str] | None = None
    trial_dirname_creator: Callable[[Any], str] | None = None
    #: how to continue an interrupted experiment, named in the warning (Ray's
    #: ``restore_entrypoint``: ``tune.run`` names its own ``resume=True``)
    restore_hint: str = 'Tuner.restore(path="{path}", trainable=...)'


@dataclass(frozen=True)
class TrialStreams:
    """How trials run as a stream (``tandem.train.stream``): one job per slot whose worker
    runs one trial after another. Only for trials that need nothing a stream cannot give
    (the tuner decides: a function trainable on the embedded service, one worker of the
    same resources, no scheduler that pauses trials to exploit them); a trial started from
    a checkpoint still runs as a job of its own."""

    #: ``launch(trial, listener) -> JobView``: a slot job holding ``trial``'s resources
    #: (every streamed trial's); its worker asks for its first trial once it runs
    launch: Callable[[TuneTrial, JobListener], JobView]
    #: ``(trial, ahead) -> StreamedRun``: what the slot's worker is handed; ``ahead``: its
    #: worker asks for the trial after it while it runs (``STREAM_AHEAD``)
    describe: Callable[[TuneTrial, bool], Any]
    #: ``(trial, StreamOutcome) -> error``: the error a failed streamed trial ends with
    error_of: Callable[[TuneTrial, Any], BaseException]
    #: makes what a trial's worker would make first (its output file): for a trial handed
    #: ahead, while its slot's worker runs the trial before
    prepare: Callable[[TuneTrial], None] = lambda trial: None


@dataclass(frozen=True)
class TrialJobs:
    """How a trial runs as a job of the job service."""

    #: ``launch(trial, checkpoint, listener) -> JobView``: submits the trial's job
    launch: Callable[[TuneTrial, Checkpoint | None, JobListener], JobView]
    #: the service may drop a finished trial's job
    forget_job: Callable[[str], None] | None = None
    #: a result with done=True ends its job by itself (a Trainable class's runner): the
    #: trial ends there and its job is not stopped, so its worker can be reused
    done_ends_job: bool = False
    #: the trainable saves a checkpoint when its verdict says "checkpoint" (a Trainable
    #: class's runner): a paused trial saves one first and resumes from it, as in Ray
    checkpoints_on_pause: bool = False
    #: config -> the trial's resources (None: the trainable decides them at launch)
    resources_of: Callable[[dict], Any] | None = None
    #: the cluster's total resources, for schedulers that reallocate them
    cluster_resources: Callable[[], Mapping[str, float]] | None = None
    #: trials run as streams in slot jobs (None: one job per trial)
    streams: TrialStreams | None = None


@dataclass(frozen=True)
class Resumed:
    """An experiment taken up again (``Tuner.restore``): its trials and how far the search
    had gone."""

    trials: list[TuneTrial]
    created: int  # trials created so far (the next trial's index)
    search_done: bool = False


class TuneController:
    """Runs one experiment to the end. Not thread-safe: ``run`` owns it; job threads only
    put events on its queue."""

    def __init__(self, search: TrialSearch, limits: TrialLimits, output: ExperimentOutput,
                 jobs: TrialJobs, *, resumed: Resumed | None = None) -> None:
        self.search, self.limits, self.output, self.jobs = search, limits, output, jobs
        self.done_ends_job = jobs.done_ends_job
        self.checkpoints_on_pause = jobs.checkpoints_on_pause
        self._resources_of = jobs.resources_of
        self._cluster_resources = jobs.cluster_resources or (lambda: {})
        self.trial_name_creator = output.trial_name_creator
        self.trial_dirname_creator = output.trial_dirname_creator
        self._launch_job = jobs.launch
        self._forget_job = jobs.forget_job or (lambda job_id: None)
        self.searcher = search.searcher
        self.scheduler = search.scheduler
        self.num_samples = search.num_samples
        self.searcher_counts = search.searcher_counts
        self.experiment_path = output.experiment_path
        self.metric = search.metric
        self.mode = search.mode
        self.max_concurrent = limits.max_concurrent_trials
        self.stopper = limits.stopper
        self.time_budget_s = limits.time_budget_s
        self.callbacks = list(output.callbacks)
        self.reporter = output.reporter
        self.name_prefix = output.name_prefix
        self.exp_uid = output.exp_uid
        self.strict_metric = search.strict_metric
        self.queue_depth = max(1, limits.queue_depth)
        fail_fast = limits.fail_fast
        self.fail_fast = fail_fast.upper() if isinstance(fail_fast, str) else bool(fail_fast)
        self._q: queue.SimpleQueue[tuple[str, int, JobEvent]] = queue.SimpleQueue()
        self.trials: list[TuneTrial] = list(resumed.trials) if resumed is not None else []
        self._by_id = {t.trial_id: t for t in self.trials}
        self._dirnames: dict[str, str] = {t.dirname: t.trial_id for t in self.trials}
        self._created = resumed.created if resumed is not None else 0
        self._search_done = resumed.search_done if resumed is not None else False
        self._queued = 0  # trials whose job waits in the service queue
        self._iteration = 0
        self._state_dirty = True
        self._last_state_save = -math.inf  # the first step writes it
        self._state_period = state_period_from_env()
        self._state_save_s = 0.0  # how long the last write of the state took
        self._last_searcher_save = 0.0
        # ended trials' entries of the state file, encoded: trial id -> (_ended_key, JSON)
        self._state_json: dict[str, tuple[tuple, str]] = {}
        self._stopping_all = False
        self.interrupted = False  # ended by a stop signal (Ctrl-C, SIGUSR1): see _StopSignal
        self._fatal: BaseException | None = None
        self._start_time = time.monotonic()
        # Kept incrementally so one loop step costs O(events), not O(trials):
        self._live_jobs = 0  # trials whose job is queued or running
        self._paused: set[str] = set()
        self._relaunch = [t for t in self.trials if t.status is TrialStatus.PENDING]
        # reports whose worker waits for the verdict on them: trial id -> [((iteration,
        # reports made by that gang), reply)]
        self._verdicts: dict[str, list[tuple[tuple[int, int], Callable[[bool, str], None]]]] = {}
        self.verdict_questions = 0  # reports that waited for a verdict (round trips)
        # trials whose latest result asked for a checkpoint (result["should_checkpoint"])
        self._checkpoint_asked: set[str] = set()
        # paused trials whose job stops once the checkpoint asked for at the pause is saved
        # (Ray saves a paused trial): trial id -> whether its worker was told to save yet
        self._pause_checkpoint: dict[str, bool] = {}
        # scheduler suggestions for trials told to pause whose job has not ended yet
        self._after_pause: dict[str, Any] = {}
        # trial streams: slot key -> slot; the slots whose worker waits for a trial; the
        # slot running each streamed trial; streamed trials told to stop whose worker has
        # not been answered "stop" yet: trial id -> when its slot is stopped instead
        self._streams = jobs.streams
        self._slots: dict[str, _Slot] = {}
        self._waiting_slots: list[_Slot] = []
        self._slot_of: dict[str, _Slot] = {}
        self._stream_stops: dict[str, float] = {}
        # streamed trials started, waiting for a slot's worker to ask for them (in order)
        self._stream_pending: dict[str, TuneTrial] = {}
        # streamed trials handed ahead to a slot whose worker runs another (``_Slot.next``)
        self._reserved: dict[str, _Slot] = {}
        # slots whose worker asked for its next trial and has none handed yet, by when
        # they asked (the first to ask started its trial first: it gets the next trial)
        self._asking_ahead: dict[str, _Slot] = {}
        self._lookahead = self._hands_ahead()
        self._slot_count = 0
        self.slots_started = 0  # slot jobs launched (tests count them)
        self.started_ahead = 0  # streamed trials started from a hand-out ahead (tests)
        if jobs.resources_of is not None:
            for t in self.trials:
                if t.resources is None:
                    t.resources = jobs.resources_of(t.config)

    # -- the loop --------------------------------------------------------------------------
    def run(self) -> list[TuneTrial]:
        for cb in self.callbacks:  # before any trial starts: a callback may refuse the run
            cb.setup(stop=self.stopper, num_samples=self.num_samples,
                     total_num_samples=self.num_samples)
        bind = getattr(self.scheduler, "bind_controller_view", None)
        if bind is not None:  # e.g. ResourceChangingScheduler's allocation function
            bind(ControllerView(self))
        self.reporter.start(self.trials)
        for t in self.trials:
            if t.status is TrialStatus.PENDING:
                self.scheduler.on_trial_add(t)
        stop_signal = _StopSignal.install()
        try:
            while not self._finished():
                if stop_signal is not None and stop_signal.received and \
                        not self._stopping_all:
                    self.interrupted = True
                    self._stop_everything()
                    continue
                self.step()
        except BaseException:
            self._stop_everything()
            raise
        finally:
            if stop_signal is not None:
                stop_signal.uninstall()
            self._save_state(force=True)
            self.reporter.end(self.trials, elapsed_s=time.monotonic() - self._start_time)
            for cb in self.callbacks:
                cb.on_experiment_end(trials=self.trials)
        if self._fatal is not None:
            raise self._fatal
        if self.interrupted:
            logger.warning(
                "Experiment has been interrupted, but the most recent state was saved.\n"
                "Continue running this experiment with: %s",
                self.output.restore_hint.format(path=self.experiment_path))
        return self.trials

    def step(self) -> None:
        """Launches what may start, then handles the events that arrived."""
        for cb in self.callbacks:
            cb.on_step_begin(iteration=self._iteration, trials=self.trials)
        if not self._stopping_all:
            self._launch()
        timeout = 0.5
        if self.time_budget_s is not None:
            left = self.time_budget_s - (time.monotonic() - self._start_time)
            if left <= 0 and not self._stopping_all:
                logger.info("TuneConfig(time_budget_s=%s) reached: stopping all trials.",
                            self.time_budget_s)
                self._stop_everything()
            timeout = max(0.01, min(timeout, left))
        try:
            items = [self._q.get(timeout=timeout)]
        except queue.Empty:
            items = []
        while True:
            try:
                items.append(self._q.get_nowait())
            except queue.Empty:
                break
        for trial_id, gen, event in items:
            if gen < 0:
                self._on_slot_event(trial_id, event)
                continue
            trial = self._by_id.get(trial_id)
            if trial is None or gen != trial.gen:
                if isinstance(event, Asked):  # from a gang this tuner already ended
                    event.call.reply(True, "stop" if event.question == "verdict"
                                     else event.call.default)
                continue
            match event:
                case Reported(rows=rows):
                    self._on_reports(trial, rows)
                case Checkpointed(checkpoint=checkpoint):
                    assert isinstance(checkpoint, Checkpoint)
                    trial.checkpoint = checkpoint
                    for cb in self.callbacks:
                        cb.on_trial_save(iteration=self._iteration, trials=self.trials,
                                         trial=trial)
                    if self._pause_checkpoint.get(trial.trial_id):
                        del self._pause_checkpoint[trial.trial_id]
                        self._stop_job(trial)  # saved at the pause: now it may stop
                case StatusChanged(status=status):
                    self._on_status(trial, status)
                case Asked(question="verdict", call=call):
                    # the worker waits for it (AskSubmitter("verdict"))
                    self.verdict_questions += 1
                    self._verdicts.setdefault(trial.trial_id, []).append(
                        (tuple(call.payload), call.reply))
                case Asked(call=call):
                    call.answer_default()  # a question this tuner does not ask
                case RankReported():
                    pass
                case _:
                    assert_never(event)
        if self._verdicts:
            self._answer_verdicts()
        if self._waiting_slots and not self._stopping_all:
            self._launch()  # the next trial goes to a slot that asked, in this step
        if self._waiting_slots:
            self._release_idle_slots()
        if self._stream_stops:
            self._check_stream_stops()
        self.reporter.refresh(self.trials)
        self._save_state()
        for cb in self.callbacks:
            cb.on_step_end(iteration=self._iteration, trials=self.trials)

    def _finished(self) -> bool:
        if self._live_jobs or self._paused or self._relaunch or self._slots:
            return False
        if self._stopping_all or self._fatal is not None:
            return True
        return self._search_done or (not self.searcher_counts and self._created >= self.num_samples)

    # -- launching --------------------------------------------------------------------------
    def _launch(self) -> None:
        while self._relaunch:  # restored trials without a job
            if not self._room():
                return
            t = self._relaunch.pop(0)
            if t.status is TrialStatus.PENDING and t.job is None:
                self._start(t, self._latest_checkpoint(t))
        while True:
            suggestion = self.scheduler.suggest()
            if suggestion is None:
                break
            trial = self._by_id.get(suggestion.trial_id)
            if trial is None:
                continue
            if trial.status is not TrialStatus.PAUSED:
                if trial.action is not None and trial.action.action is Action.PAUSE:
                    # told to pause, its job not ended yet: act once it has (dropping the
                    # suggestion would leave the trial paused for good)
                    self._after_pause[trial.trial_id] = suggestion
                continue
            self._act_on_suggestion(trial, suggestion)
        while self._room(ahead=True) and not self._search_done:
            if not self.searcher_counts and self._created >= self.num_samples:
                break
            trial_id = f"{self.exp_uid}_{self._created:05d}"
            config = self.searcher.suggest(trial_id)
            if config is None:
                break
            if isinstance(config, str):  # Searcher.FINISHED: it will suggest nothing more
                self._search_done = True
                break
            try:
                trial = self._new_trial(trial_id, config)
            except ConfigError as e:
                # a trial name / folder creator that cannot work: the experiment ends as on a
                # launch error, after the trials already running are stopped and gone
                self._fatal = e
                self._stop_everything()
                return
            self.scheduler.on_trial_add(trial)
            initial = getattr(self.scheduler, "initial_config", None)
            if initial is not None:  # e.g. PopulationBasedTrainingReplay's first config
                trial.config = initial(trial)
            self._start(trial, None)

    def _act_on_suggestion(self, trial: TuneTrial, suggestion: Any) -> None:
        self._paused.discard(trial.trial_id)
        if suggestion.action.name == "RESUME":
            self.searcher.on_unpause(trial.trial_id)
            if getattr(suggestion, "resources", None) is not None:
                trial.resources = suggestion.resources  # ResourceChangingScheduler's
                trial.decisions.append({"iteration": trial.iteration, "time": time.time(),
                                        "action": "RESOURCES", "reason": suggestion.reason})
            trial.status = TrialStatus.PENDING
            self._start(trial, trial.checkpoint)
        elif suggestion.action.name == "RESTART":  # e.g. synchronous PBT's exploit step
            self.searcher.on_unpause(trial.trial_id)
            trial.config = dict(suggestion.config)
            trial.decisions.append({"iteration": trial.iteration, "time": time.time(),
                                    "action": "RESTART", "reason": suggestion.reason})
            trial.status = TrialStatus.PENDING
            self._start(trial, suggestion.checkpoint)
            self.reporter.status_change(trial, self.trials, suggestion.reason)
        else:
            self._end_trial(trial, TrialStatus.TERMINATED, remove=True, note=suggestion.reason)

    def _room(self, ahead: bool = False) -> bool:
        """A trial may start. ``ahead``: a new streamed trial may also start as the next
        trial of a slot that runs one (``_hands_ahead``), at max_concurrent_trials."""
        if self._queued >= self.queue_depth:
            return False
        # a trial handed ahead runs only once its slot's trial has ended: it does not take
        # a place a slot waiting for a trial would run one in now
        if self.max_concurrent is None or \
                self._live_jobs - len(self._reserved) < self.max_concurrent:
            return True
        return (ahead and not self._stream_pending and bool(self._asking_ahead)
                and self._ahead_open())

    def _new_trial(self, trial_id: str, config: dict) -> TuneTrial:
        index = self._created
        self._created += 1
        name = f"{self.name_prefix}_{trial_id}"
        tag = ""
        last = getattr(self.searcher, "last_variant", None)
        if last is not None and getattr(last, "resolved_vars", None):
            from tandem.tune.search.variant_generator import format_vars

            tag = format_vars(last.resolved_vars)
        trial = TuneTrial(trial_id, config, name=name, index=index,
                          path=self.experiment_path.rstrip("/") + "/" + name,
                          experiment_tag=f"{index}_{tag}" if tag else str(index),
                          trainable_name=self.name_prefix)
        if self._resources_of is not None:
            trial.resources = self._resources_of(config)
        if self.trial_name_creator is not None:
            trial.name = _created_name(self.trial_name_creator, trial, "trial_name_creator")
        dirname = trial.name
        if self.trial_dirname_creator is not None:
            dirname = _created_name(self.trial_dirname_creator, trial, "trial_dirname_creator")
        if dirname in self._dirnames:
            raise ConfigError(
                f"TuneConfig(trial_dirname_creator/trial_name_creator) gave the folder name "
                f"{dirname!r} to two trials ({self._dirnames[dirname]} and {trial_id}); each "
                f"trial needs its own folder: include trial.trial_id in the name."
            )
        self._dirnames[dirname] = trial_id
        trial.path = self.experiment_path.rstrip("/") + "/" + dirname
        self.trials.append(trial)
        self._by_id[trial_id] = trial
        self._state_dirty = True
        return trial

    def _start(self, trial: TuneTrial, checkpoint: Checkpoint | None) -> None:
        if checkpoint is None and self._streams is not None:
            self._start_streamed(trial)
            return
        trial.gen += 1
        gen = trial.gen
        q = self._q
        tid = trial.trial_id

        def listener(event: JobEvent) -> None:
            q.put((tid, gen, event))

        trial.status = TrialStatus.PENDING
        trial.action = None
        trial.gang_reports = 0
        self._verdicts.pop(tid, None)  # the old job's workers are gone
        try:
            trial.job = self._launch_job(trial, checkpoint, listener)
        except (ConfigError, TandemError) as e:
            # e.g. per-trial resources larger than the cluster: this trial can never run
            trial.job = None
            self._fatal = e
            self._stop_everything()
            return
        self._live_jobs += 1
        self._queued += 1
        self._state_dirty = True

    # -- trial streams ----------------------------------------------------------------------
    def _start_streamed(self, trial: TuneTrial) -> None:
        """The trial goes to a slot whose worker waits for one, else it waits for the next
        slot that asks (a new slot job is launched when none waits for room)."""
        assert self._streams is not None
        trial.gen += 1
        trial.status = TrialStatus.PENDING
        trial.action = None
        trial.gang_reports = 0
        self._verdicts.pop(trial.trial_id, None)
        self._state_dirty = True
        self._live_jobs += 1
        if self._waiting_slots:
            slot = self._waiting_slots.pop()
            reply, slot.reply = slot.reply, None
            assert reply is not None
            self._hand(slot, trial, reply)
            return
        if self._asking_ahead and self._ahead_open():
            self._reserve(next(iter(self._asking_ahead.values())), trial)
            return
        self._queued += 1
        self._stream_pending[trial.trial_id] = trial
        self._grow_slots()

    def _hand(self, slot: _Slot, trial: TuneTrial,
              reply: Callable[[bool, object], None]) -> None:
        """``slot``'s waiting worker runs ``trial`` next."""
        assert self._streams is not None
        slot.trial = trial
        self._slot_of[trial.trial_id] = slot
        # a slot's worker asks ahead only once it has gone on to a second trial: a trial
        # that leaves torch, a CUDA context or a thread behind ends its stream (a fresh
        # process runs the next), and a trial handed ahead to it would start out of order
        reply(True, self._streams.describe(trial, self._lookahead and slot.proven))
        self._trial_running(trial)

    # -- trials handed ahead ----------------------------------------------------------------
    def _hands_ahead(self) -> bool:
        """Whether a slot's worker is handed its next trial while it runs one, so it starts
        that trial the moment the one before ends, with no round trip to this loop between
        them (``tandem.train.stream``'s ``STREAM_AHEAD``). Only where that changes nothing
        but the timing: trials streamed at ``max_concurrent_trials`` (the slots are as many
        and all run, so every trial waits for one of them anyway), by the FIFO scheduler
        (it runs trials in the order they came) and the basic variant generator (a trial's
        config does not depend on the results before it, so creating it while the trial
        before it still runs makes the same config). The trial handed ahead is created,
        PENDING, up to one per slot beyond ``max_concurrent_trials``; it runs only once the
        slot's trial has ended, so no more trials than that run at once."""
        from tandem.tune.schedulers.fifo import FIFOScheduler
        from tandem.tune.search.basic_variant import BasicVariantGenerator

        return (self._streams is not None and self.max_concurrent is not None
                and type(self.scheduler) is FIFOScheduler
                and type(self.searcher) is BasicVariantGenerator)

    def _ahead_open(self) -> bool:
        """Trials may be handed ahead now: every slot there will be runs, and its worker has
        gone on to a second trial (``_Slot.proven``; a trial waiting for a slot goes to
        one that asks for it, not ahead to one busy with another: the trials start in
        order, and none is handed to a worker that ends after its trial)."""
        return (self._lookahead and not self._stopping_all and self._fatal is None
                and self.max_concurrent is not None
                and len(self._slots) >= self.max_concurrent
                and all(s.running and s.proven and (s.trial is not None or s.reply is not None)
                        for s in self._slots.values()))

    def _reserve(self, slot: _Slot, trial: TuneTrial) -> None:
        """``slot``'s worker runs ``trial`` once its trial ends (it asked ahead)."""
        assert self._streams is not None and slot.ahead is not None
        reply, slot.ahead = slot.ahead, None
        del self._asking_ahead[slot.key]
        slot.next = trial
        self._reserved[trial.trial_id] = slot
        reply(True, self._streams.describe(trial, True))
        self._streams.prepare(trial)

    def _unreserve(self, slot: _Slot) -> None:
        """The trial handed ahead to ``slot`` waits for a slot again, first in line (its
        worker will not run it), or is let go if it ended meanwhile."""
        if slot.ahead is not None:  # the worker no longer waits for that answer
            reply, slot.ahead = slot.ahead, None
            del self._asking_ahead[slot.key]
            reply(True, None)
        trial, slot.next = slot.next, None
        if trial is None:
            return
        self._reserved.pop(trial.trial_id, None)
        if trial.status is TrialStatus.PENDING and not self._stopping_all:
            self._stream_pending = {trial.trial_id: trial, **self._stream_pending}
            self._queued += 1
        else:
            self._live_jobs -= 1

    def _serve_aheads(self) -> None:
        """Slots that asked ahead get the trials waiting for a slot, in order."""
        if not (self._stream_pending and self._asking_ahead and self._ahead_open()):
            return
        for slot in list(self._asking_ahead.values()):
            trial = self._next_pending()
            if trial is None:
                return
            self._reserve(slot, trial)

    def _on_ahead(self, slot: _Slot, call: JobCall) -> None:
        """``STREAM_AHEAD``: the worker runs ``ask.started`` (after ending its trial with
        ``ask.outcome``, when it started the trial handed ahead) and asks for the next."""
        ask = call.payload
        slot.running = True
        if ask.outcome is not None:
            nxt = slot.next
            if nxt is None or nxt.trial_id != ask.started:  # not what it was handed
                call.reply(True, None)
                logger.warning("slot %s started %s, not the trial handed to it; stopping it",
                               slot.key, ask.started)
                self._stop_slot(slot)
                return
            prev = slot.trial
            if prev is not None and ask.outcome.run_id == prev.trial_id:
                # the trial before ends first, as when the next starts after a round trip
                self._stream_ended(slot, prev, ask.outcome)
            if self._slots.get(slot.key) is not slot:  # the experiment let its slots go
                call.reply(True, None)
                return
            slot.next = None
            self._reserved.pop(nxt.trial_id, None)
            slot.trial = nxt
            self._slot_of[nxt.trial_id] = slot
            if nxt.status is not TrialStatus.PENDING or self._stopping_all:
                # it ended while it waited (e.g. the experiment stopped): the worker stops
                self._stream_stops[nxt.trial_id] = 0.0
                call.reply(True, None)
                return
            self.started_ahead += 1
            self._trial_running(nxt)
        elif slot.trial is None or slot.trial.trial_id != ask.started:
            call.reply(True, None)  # a trial that ended already
            return
        slot.ahead = call.reply
        self._asking_ahead[slot.key] = slot
        self._serve_aheads()

    def _next_pending(self) -> TuneTrial | None:
        """The streamed trial waiting longest for a slot (counted out of the queue)."""
        while self._stream_pending:
            tid = next(iter(self._stream_pending))
            trial = self._stream_pending.pop(tid)
            self._queued = max(0, self._queued - 1)
            if trial.status is TrialStatus.PENDING:
                return trial
            self._live_jobs -= 1  # ended while it waited (e.g. the experiment stopped)
        return None

    def _grow_slots(self) -> None:
        """A new slot job when trials wait for a slot and no slot job waits for room yet:
        slots grow to what the resources hold, and one more waits in the queue. Under
        ``max_concurrent_trials`` the slots are bounded anyway: they start together, as
        that many jobs of their own would (not one after another)."""
        if not self._stream_pending or self._stopping_all or self._fatal is not None:
            return
        bounded = self.max_concurrent is not None
        if self.max_concurrent is not None and len(self._slots) >= self.max_concurrent:
            return
        starting = 0  # slots that will ask for their first trial
        for s in self._slots.values():
            if not s.running:
                if not bounded:
                    return
                starting += 1
            elif s.trial is None and s.reply is None:
                starting += 1
        if len(self._stream_pending) <= starting:
            return
        assert self._streams is not None
        self._slot_count += 1
        key = f"{_SLOT_PREFIX}{self._slot_count}"
        q = self._q

        def listener(event: JobEvent) -> None:
            q.put((key, -1, event))

        slot = _Slot(key)
        try:
            slot.job = self._streams.launch(next(iter(self._stream_pending.values())),
                                            listener)
        except (ConfigError, TandemError) as e:
            self._fatal = e
            self._stop_everything()
            return
        self.slots_started += 1
        self._slots[key] = slot

    def _trial_running(self, trial: TuneTrial) -> None:
        trial.status = TrialStatus.RUNNING
        self._state_dirty = True
        self.reporter.status_change(trial, self.trials)
        for cb in self.callbacks:
            cb.on_trial_start(iteration=self._iteration, trials=self.trials, trial=trial)

    def _on_slot_event(self, key: str, event: JobEvent) -> None:
        slot = self._slots.get(key)
        if slot is None:  # a slot this tuner already let go
            if isinstance(event, Asked):
                event.call.reply(True, "stop" if event.question == "verdict" else None)
            return
        match event:
            case Reported(rows=rows):
                self._on_slot_rows(slot, rows)
            case StatusChanged(status=status):
                self._on_slot_status(slot, status)
            case Asked(question="verdict", call=call):
                trial = slot.trial
                if trial is None:
                    call.reply(True, "stop")
                    return
                self.verdict_questions += 1
                self._verdicts.setdefault(trial.trial_id, []).append(
                    (tuple(call.payload), call.reply))
            case Asked(question="stream_ahead", call=call):
                self._on_ahead(slot, call)
            case Asked(question="stream_next", call=call):
                # payload: how the slot's last trial ended, None before its first
                outcome = call.payload
                slot.running = True
                if outcome is not None and not outcome.last:
                    slot.proven = True  # its worker goes on to another trial
                # a trial handed ahead it did not see in time is its answer below (first in
                # line again), or another slot's if this one ends
                self._unreserve(slot)
                trial = slot.trial
                ended = trial if trial is not None and outcome is not None and \
                    outcome.run_id == trial.trial_id else None
                if outcome is not None and outcome.last:
                    call.reply(True, None)  # the stream ends: its job finishes
                    if ended is not None:
                        self._stream_ended(slot, ended, outcome)
                    return
                # The worker waits for this answer from now on: the slot waits as one with
                # no trial, so whatever ending the trial leads to is answered (the
                # experiment stopping answers it "no more trials" and waits for its job;
                # a restarted trial may go straight back to it)
                slot.reply = call.reply
                self._waiting_slots.append(slot)
                if ended is not None:
                    self._stream_ended(slot, ended, outcome)
                if slot.reply is None:  # answered meanwhile
                    return
                if self._stopping_all:
                    self._release_idle_slots()
                    return
                nxt = self._next_pending()
                if nxt is not None:
                    self._waiting_slots.remove(slot)
                    slot.reply = None
                    self._hand(slot, nxt, call.reply)
                self._grow_slots()
            case Asked(call=call):
                call.answer_default()
            case Checkpointed() | RankReported():
                pass  # a streamed trial's checkpoints come with its rows
            case _:
                assert_never(event)

    def _on_slot_rows(self, slot: _Slot, rows: list[dict]) -> None:
        for row in rows:
            tid = row.pop(STREAM_RUN_KEY, None)
            path = row.pop(STREAM_CHECKPOINT_KEY, None)
            only = row.pop(STREAM_CHECKPOINT_ONLY, False)
            trial = self._by_id.get(tid) if isinstance(tid, str) else None
            if trial is None or self._slot_of.get(trial.trial_id) is not slot:
                continue
            if path is not None:
                trial.checkpoint = Checkpoint(path)
                self._state_dirty = True
                for cb in self.callbacks:
                    cb.on_trial_save(iteration=self._iteration, trials=self.trials, trial=trial)
            if only:
                continue
            if trial.action is not None and trial.trial_id in self._stream_stops:
                # it went past the report it was stopped at without waiting: end its slot
                self._stream_stops[trial.trial_id] = 0.0
            self._on_reports(trial, [row])

    def _on_slot_status(self, slot: _Slot, status: JobStatus) -> None:
        if status is JobStatus.RUNNING:
            slot.running = True
            self._grow_slots()
            self._serve_aheads()
            return
        if not status.is_terminal:
            return
        self._slots.pop(slot.key, None)
        if slot in self._waiting_slots:
            self._waiting_slots.remove(slot)
        self._unreserve(slot)
        job = slot.job
        outcome = job.outcome if job is not None else None
        if job is not None:
            self._forget_job(job.job_id)
        trial = slot.trial
        slot.trial = None
        if trial is None and not slot.running and outcome is not None and \
                outcome.error is not None and not self._stopping_all:
            # a slot job that failed before it ran (e.g. refused): the trial waiting
            # longest fails with its error, as its own job would have
            trial = self._next_pending()  # still counted live: released below
        self._grow_slots()
        if trial is None:
            return
        self._release(trial)
        trial.job_state = status.value
        if trial.status.is_terminal:
            return
        if trial.status is TrialStatus.PENDING and not slot.running:
            pass  # its slot never started (e.g. refused): the trial fails with its error
        error = outcome.error if outcome is not None and outcome.error is not None else \
            TuneError(f"the worker running trial {trial.name} ended ({status.value}) before "
                      f"the trial did")
        self._stream_failed(trial, error)

    def _stream_ended(self, slot: _Slot, trial: TuneTrial, outcome: StreamOutcome) -> None:
        """A streamed trial's worker says how it ended (after all of its reports)."""
        assert self._streams is not None
        slot.trial = None
        self._release(trial)
        if outcome.error is not None:
            trial.job_state = JobStatus.FAILED.value
        else:
            trial.job_state = (JobStatus.STOPPED if outcome.stopped else JobStatus.FINISHED).value
        action = trial.action
        if action is not None and action.action in (Action.PAUSE, Action.RESTART) \
                and not trial.status.is_terminal:
            # paused or restarted at a report (e.g. MedianStoppingRule yielding to waiting
            # trials): as when a trial's own job ends after that decision
            trial.action = None
            self._pause_checkpoint.pop(trial.trial_id, None)
            if action.action is Action.PAUSE:
                trial.status = TrialStatus.PAUSED
                self._paused.add(trial.trial_id)
                self.reporter.status_change(trial, self.trials, action.reason)
                later = self._after_pause.pop(trial.trial_id, None)
                if later is not None:
                    self._act_on_suggestion(trial, later)
            else:
                trial.config = dict(action.config)
                self._start(trial, action.checkpoint)
                self.reporter.status_change(trial, self.trials, action.reason)
            return
        if trial.status.is_terminal:
            return  # stopped by a decision, or the experiment
        if outcome.error is not None:
            self._stream_failed(trial, self._streams.error_of(trial, outcome))
        else:
            self._end_trial(trial, TrialStatus.TERMINATED)

    def _release(self, trial: TuneTrial) -> None:
        self._slot_of.pop(trial.trial_id, None)
        self._stream_stops.pop(trial.trial_id, None)
        self._live_jobs -= 1
        self._state_dirty = True

    def _stream_failed(self, trial: TuneTrial, error: BaseException) -> None:
        trial.error = error
        trial.num_failures += 1
        try:
            make_dirs(trial.path)
            write_file(join_path(trial.path, "error.txt"), str(error).encode())
        except OSError as e:
            logger.warning("could not write %s/error.txt: %s", trial.path, e)
        lines = str(error).strip().splitlines()
        if len(lines) > 1 and lines[0].startswith("Training failed due to"):
            lines = lines[1:]
        first = lines[0] if lines else ""
        self._end_trial(trial, TrialStatus.ERROR, note=first[:200])
        if self.fail_fast:
            self._fail_fast(trial)

    def _release_idle_slots(self) -> None:
        """Slots waiting for a trial when no more will come end (their jobs finish), and so
        do slot jobs still waiting for room."""
        if not (self._stopping_all or self._fatal is not None or self._search_done
                or (not self.searcher_counts and self._created >= self.num_samples)):
            return
        for slot in self._waiting_slots:
            reply, slot.reply = slot.reply, None
            if reply is not None:
                reply(True, None)
        self._waiting_slots.clear()
        if self._stream_pending:
            return
        for slot in self._slots.values():
            if not slot.running and slot.trial is None:
                self._stop_slot(slot)

    def _check_stream_stops(self) -> None:
        now = time.monotonic()
        for tid, deadline in list(self._stream_stops.items()):
            slot = self._slot_of.get(tid)
            if slot is None:
                del self._stream_stops[tid]
            elif now >= deadline:
                del self._stream_stops[tid]
                self._stop_slot(slot)

    @staticmethod
    def _stop_slot(slot: _Slot) -> None:
        if slot.job is not None:
            try:
                slot.job.stop()
            except Exception as e:  # noqa: BLE001 - a job that already ended
                logger.debug("stopping slot %s: %s", slot.key, e)

    def _stop_slots(self) -> None:
        """Ends every slot (waiting ones are told no more trials come; running ones are
        stopped) and waits for their jobs."""
        for trial in self._stream_pending.values():
            if trial.status is TrialStatus.PENDING:
                trial.status = TrialStatus.TERMINATED
        while self._next_pending() is not None:
            pass
        # told "no more trials" now: their workers return and their jobs finish
        answered = {slot.key for slot in self._waiting_slots if slot.reply is not None}
        self._release_idle_slots()
        slots = list(self._slots.values())
        for slot in slots:
            # every other slot is stopped: one running a trial, and one whose worker's
            # question is still queued behind the event being handled (it would wait for an
            # answer this loop gives only after the wait below)
            if slot.key not in answered:
                self._stop_slot(slot)
        for slot in slots:
            if slot.job is not None:
                slot.job.wait_outcome(30)
            if slot.trial is not None:
                self._release(slot.trial)
                slot.trial = None
            self._unreserve(slot)
        self._slots.clear()

    # -- events ------------------------------------------------------------------------------
    def _on_status(self, trial: TuneTrial, status: JobStatus) -> None:
        if status is JobStatus.RUNNING:
            if trial.status is TrialStatus.PENDING:
                self._queued = max(0, self._queued - 1)
                self._trial_running(trial)
            return
        if not status.is_terminal:
            return
        trial.job_state = status.value  # recorded in experiment_state.json
        self._state_dirty = True
        job = trial.job
        if trial.status is TrialStatus.PENDING:
            self._queued = max(0, self._queued - 1)
        outcome = job.outcome if job is not None else None
        if job is not None:
            self._forget_job(job.job_id)  # the service need not keep a finished trial's job
        if outcome is not None and isinstance(outcome.value, Result):
            trial.result = outcome.value
            if outcome.value.checkpoint is not None:
                trial.checkpoint = outcome.value.checkpoint
        if job is not None:
            self._live_jobs -= 1
        trial.job = None
        self._pause_checkpoint.pop(trial.trial_id, None)
        action = trial.action
        trial.action = None
        if action is not None:
            if action.action is Action.PAUSE:
                trial.status = TrialStatus.PAUSED
                self._paused.add(trial.trial_id)
                self._state_dirty = True
                self.reporter.status_change(trial, self.trials, action.reason)
                later = self._after_pause.pop(trial.trial_id, None)
                if later is not None:
                    self._act_on_suggestion(trial, later)
                return
            if action.action is Action.RESTART:
                trial.config = dict(action.config)
                self._start(trial, action.checkpoint)
                self.reporter.status_change(trial, self.trials, action.reason)
                return
            return  # STOP: already ended when decided
        if trial.status.is_terminal:
            return
        if status is JobStatus.FAILED:
            trial.error = outcome.error if outcome is not None else TuneError("trial failed")
            trial.num_failures += 1
            lines = str(trial.error).strip().splitlines()
            if len(lines) > 1 and lines[0].startswith("Training failed due to"):
                lines = lines[1:]  # WorkerGroupError's header: the note says what failed
            first = lines[0] if lines else ""
            self._end_trial(trial, TrialStatus.ERROR, note=first[:200])
            if self.fail_fast:
                self._fail_fast(trial)
        else:
            self._end_trial(trial, TrialStatus.TERMINATED)

    def _on_reports(self, trial: TuneTrial, rows: list[dict]) -> None:
        if trial.trial_id in self._pause_checkpoint and trial.action is not None:
            # it went past the pause without saving (its report did not wait for the
            # verdict): stop it now; it resumes from its latest checkpoint, if any
            del self._pause_checkpoint[trial.trial_id]
            self._stop_job(trial)
        if trial.status is not TrialStatus.RUNNING or trial.action is not None:
            return
        self._state_dirty = True
        for row in rows:
            result = row
            trial.gang_reports += 1
            result["trial_id"] = trial.trial_id
            trial.last_result = result
            trial.time_total_s = result.get("time_total_s", trial.time_total_s)
            self._iteration += 1
            missing = self._missing_metric(result)
            if missing is not None:
                keys = sorted(k for k in result if k not in ("training_iteration", "time_total_s", "trial_id"))
                self._fatal = TuneError(
                    f"Trial {trial.name} reported a result without the metric "
                    f"{missing!r} that the {type(self.scheduler).__name__}/"
                    f"{type(self.searcher).__name__} need (metric={self.strict_metric!r}); it "
                    f"reported: {keys}. Report it with tune.report({{{missing!r}: "
                    f"value}}), or set TuneConfig(metric=...) to one of those keys."
                )
                self._stop_everything()
                return
            for cb in self.callbacks:
                cb.on_trial_result(iteration=self._iteration, trials=self.trials, trial=trial,
                                   result=result)
            if result.get(SHOULD_CHECKPOINT):  # a callback asked (Ray's force checkpoint)
                self._checkpoint_asked.add(trial.trial_id)
            stopped = self.stopper is not None and self.stopper(trial.trial_id, result)
            if stopped or result.get("done") is True:
                if not stopped and self.done_ends_job:
                    trial.action = _FINISHING  # its job ends by itself, its worker reusable
                    self._end_trial(trial, TrialStatus.TERMINATED, note="done")
                else:
                    self._end_trial(trial, TrialStatus.TERMINATED, stop_job=True,
                                    note="stop criteria")
                if getattr(self.stopper, "stop_all", None) and self.stopper.stop_all():
                    self._stop_everything()
                return
            decision = self.scheduler.on_trial_result(trial, result)
            act = decision.action
            if act is not Action.STOP:  # Ray's order: the scheduler first (BOHB reads what
                self.searcher.on_trial_result(trial.trial_id, result)  # HyperBand adds)
            if act is Action.CONTINUE:
                continue
            trial.decisions.append({"iteration": trial.iteration, "time": time.time(),
                                    "action": act.name, "reason": decision.reason})
            if act is Action.STOP:
                self._end_trial(trial, TrialStatus.TERMINATED, stop_job=True, note=decision.reason)
                return
            if act in (Action.PAUSE, Action.RESTART):
                if act is Action.PAUSE:
                    self.searcher.on_pause(trial.trial_id)
                trial.action = decision
                if act is Action.PAUSE and self.checkpoints_on_pause:
                    self._pause_checkpoint[trial.trial_id] = False  # its verdict: "checkpoint"
                else:
                    self._stop_job(trial)
                return
        if self.stopper is not None and getattr(self.stopper, "stop_all", None) and self.stopper.stop_all():
            self._stop_everything()

    def _missing_metric(self, result: dict) -> str | None:
        """The needed metric (one of them, for multi-objective search) ``result`` lacks."""
        strict = self.strict_metric
        if strict is None:
            return None
        for name in strict if isinstance(strict, (list, tuple)) else (strict,):
            if name not in result:
                return name
        return None

    def _end_trial(self, trial: TuneTrial, status: TrialStatus, *, stop_job: bool = False,
                   remove: bool = False, note: str = "") -> None:
        if stop_job:
            trial.action = _STOPPED
            self._stop_job(trial)
        trial.status = status
        self._state_dirty = True
        if remove:
            self.scheduler.on_trial_remove(trial)
        elif status is TrialStatus.ERROR:
            self.scheduler.on_trial_error(trial)
        else:
            self.scheduler.on_trial_complete(trial, trial.last_result)
        self.searcher.on_trial_complete(trial.trial_id, trial.last_result,
                                        error=status is TrialStatus.ERROR)
        self.reporter.status_change(trial, self.trials, note)
        for cb in self.callbacks:
            hook = cb.on_trial_error if status is TrialStatus.ERROR else cb.on_trial_complete
            hook(iteration=self._iteration, trials=self.trials, trial=trial)

    def _answer_verdicts(self) -> None:
        """Answers each waiting worker once its report was handled: ``"stop"`` when a
        decision ended, paused or is restarting its trial, else ``"continue"``."""
        for tid in list(self._verdicts):
            trial = self._by_id.get(tid)
            waiting = self._verdicts[tid]
            decided = (trial is None or trial.action is not None or self._stopping_all
                       or trial.status not in (TrialStatus.RUNNING, TrialStatus.PENDING))
            keep = []
            for (iteration, count), reply in waiting:
                if trial is not None and trial.action is _FINISHING and not self._stopping_all:
                    reply(True, "continue")  # it reported done: it ends by itself
                elif (self._pause_checkpoint.get(tid) is False and not self._stopping_all
                      and trial is not None and trial.status is TrialStatus.RUNNING):
                    self._pause_checkpoint[tid] = True
                    reply(True, "checkpoint")  # paused at this report: save, then stopped
                elif decided:
                    self._stream_stops.pop(tid, None)
                    reply(True, "stop")
                elif trial is not None and (trial.iteration >= iteration
                                            or trial.gang_reports >= count):
                    asked = tid in self._checkpoint_asked
                    self._checkpoint_asked.discard(tid)
                    reply(True, "checkpoint" if asked else "continue")
                else:
                    keep.append(((iteration, count), reply))
            if keep:
                self._verdicts[tid] = keep
            else:
                del self._verdicts[tid]

    def _fail_fast(self, trial: TuneTrial) -> None:
        """``FailureConfig(fail_fast=...)``: the first trial error ends the experiment; with
        ``"raise"`` its error is raised from ``fit()`` (Ray Tune's semantics)."""
        logger.info("FailureConfig(fail_fast=%r): trial %s failed; stopping the experiment.",
                    self.fail_fast, trial.name)
        if self.fail_fast == "RAISE" and self._fatal is None and trial.error is not None:
            self._fatal = trial.error
        self._stop_everything()

    def _stop_job(self, trial: TuneTrial) -> None:
        if trial.trial_id in self._reserved:
            return  # handed ahead: if its worker starts it, it is stopped then (_on_ahead)
        if self._stream_pending.pop(trial.trial_id, None) is not None:
            self._queued = max(0, self._queued - 1)  # it never reached a slot
            self._live_jobs -= 1
            return
        if trial.trial_id in self._slot_of:
            # its worker is answered "stop" at the report waiting for the verdict (the
            # trial ends there, the slot goes on); a worker that did not wait ends its slot
            self._stream_stops.setdefault(trial.trial_id, time.monotonic() + STREAM_STOP_WAIT_S)
            return
        job = trial.job
        if job is not None:
            try:
                job.stop()
            except Exception as e:  # noqa: BLE001 - a job that already ended
                logger.debug("stopping %s: %s", trial.name, e)

    def _stop_everything(self) -> None:
        self._stopping_all = True
        for t in self.trials:
            if not t.status.is_terminal:  # saved as it was: Tuner.restore resumes it
                t.unfinished_status = t.status
            if t.status in (TrialStatus.RUNNING, TrialStatus.PENDING):
                if t.trial_id in self._slot_of or t.trial_id in self._stream_pending \
                        or t.trial_id in self._reserved:
                    t.action = _STOPPED
                    self._end_trial(t, TrialStatus.TERMINATED, note="experiment stopped")
                elif t.job is not None:
                    self._end_trial(t, TrialStatus.TERMINATED, stop_job=True, note="experiment stopped")
                else:
                    t.status = TrialStatus.TERMINATED
            elif t.status is TrialStatus.PAUSED:
                t.status = TrialStatus.TERMINATED
        self._paused.clear()
        self._pause_checkpoint.clear()
        self._relaunch.clear()
        self._stop_slots()
        # wait for the stopped jobs so nothing outlives the experiment
        for t in self.trials:
            job = t.job
            if job is not None:
                job.wait_outcome(30)  # only waiting for the end
                t.job = None
                self._live_jobs -= 1

    # -- state on disk ----------------------------------------------------------------------
    def _latest_checkpoint(self, trial: TuneTrial) -> Checkpoint | None:
        if trial.checkpoint is not None:
            return trial.checkpoint
        from tandem.train.api.result import list_checkpoints

        found = sorted(list_checkpoints(trial.path))
        return Checkpoint(found[-1]) if found else None

    def _save_state(self, force: bool = False) -> None:
        now = time.monotonic()
        # every state change is written, coalesced: at most every 0.25 s, and no more often
        # than keeps writing it (O(trials)) under ~5 % of the loop's time (as Ray's
        # automatic experiment checkpoint period does)
        interval = max(0.25, 1e-4 * len(self.trials), 20 * self._state_save_s)
        if "://" in self.experiment_path:
            interval = max(interval, REMOTE_STATE_INTERVAL_S)  # one upload per write
        if self._state_period is not None:  # TUNE_GLOBAL_CHECKPOINT_S, as in Ray
            interval = self._state_period
        if not force and (not self._state_dirty or now - self._last_state_save < interval):
            return
        self._last_state_save = now
        self._state_dirty = False
        make_dirs(self.experiment_path)
        state = {
            "experiment_path": self.experiment_path,
            "exp_uid": self.exp_uid,
            "name_prefix": self.name_prefix,
            "created": self._created,
            "search_done": self._search_done,
            "metric": self.metric,
            "mode": self.mode,
            "timestamp": time.time(),
            "trials": [],
        }
        write_file(join_path(self.experiment_path, STATE_FILE),
                   _spliced(json.dumps(state, default=repr), self._trials_json()).encode())
        self._state_save_s = time.monotonic() - now
        if force or now - self._last_searcher_save > 5.0:
            self._last_searcher_save = now
            try:
                write_file(join_path(self.experiment_path, SEARCHER_FILE),
                           cloudpickle.dumps((type(self.searcher), self.searcher.get_state())))
                write_file(join_path(self.experiment_path, SCHEDULER_FILE),
                           cloudpickle.dumps(self.scheduler))
            except Exception as e:  # noqa: BLE001 - restore then starts them afresh
                logger.warning("could not save the searcher/scheduler state: %s", e)


    def _trials_json(self) -> list[str]:
        """Each trial's entry of the state file, JSON-encoded; an ended trial's is encoded
        once and kept while what it shows is unchanged, so a write of the state costs
        O(running trials) of encoding, not O(trials)."""
        cache = self._state_json
        out = []
        for t in self.trials:
            if t.job is None and t.status.is_terminal:
                key = _ended_key(t)
                hit = cache.get(t.trial_id)
                if hit is not None and hit[0] == key:
                    out.append(hit[1])
                    continue
                text = json.dumps(_trial_state(t), default=repr)
                cache[t.trial_id] = (key, text)
                out.append(text)
            else:
                out.append(json.dumps(_trial_state(t), default=repr))
        return out


class ControllerView:
    """What a scheduler's helper may read of the running experiment (Ray's
    ``tune_controller`` argument of a resources allocation function): the trials and the
    cluster's resources. Read only."""

    def __init__(self, controller: TuneController) -> None:
        self._controller = controller
        self._resource_updater = _ResourceUpdater(controller._cluster_resources)
        self.experiment_path = controller.experiment_path

    def get_trials(self) -> list[TuneTrial]:
        return list(self._controller.trials)

    def get_live_trials(self) -> list[TuneTrial]:
        """The trials not yet TERMINATED or ERROR."""
        return [t for t in self._controller.trials if not t.status.is_terminal]

    def get_trial(self, trial_id: str) -> TuneTrial | None:
        return self._controller._by_id.get(trial_id)


class _ResourceUpdater:
    """Ray's ``tune_controller._resource_updater``: the cluster's total resources."""

    def __init__(self, resources: Callable[[], Mapping[str, float]]) -> None:
        self._resources = resources

    def get_num_cpus(self) -> float:
        return float(self._resources().get("CPU", 0))

    def get_num_gpus(self) -> float:
        return float(self._resources().get("GPU", 0))

    def get_resources(self) -> dict[str, float]:
        return dict(self._resources())


_SLOT_PREFIX = "\x00slot-"
STREAM_STOP_WAIT_S = 2.0
"""A streamed trial told to stop whose worker does not ask for the verdict within this
long (it did not wait at that report) is ended with its slot."""


class _Slot:
    """A slot job of a trial stream: the trial it runs, or the reply that hands its
    waiting worker the next one."""

    __slots__ = ("ahead", "job", "key", "next", "proven", "reply", "running", "trial")

    def __init__(self, key: str) -> None:
        self.key = key
        self.job: JobView | None = None
        self.trial: TuneTrial | None = None
        self.reply: Callable[[bool, object], None] | None = None
        self.running = False
        #: the reply to its worker's ``STREAM_AHEAD`` while no trial is handed ahead yet
        self.ahead: Callable[[bool, object], None] | None = None
        #: the trial handed ahead (PENDING): its worker runs it once ``trial`` ends
        self.next: TuneTrial | None = None
        #: its worker went on to a second trial, so it may be handed trials ahead (a
        #: worker whose trial left torch, a CUDA context or a thread behind ends instead)
        self.proven = False


class _StopSignal:
    """Ray Tune's stop signal: the first SIGINT (Ctrl-C) or SIGUSR1 while ``Tuner.fit()``
    runs ends the experiment gracefully (trials stopped, the state saved, ``fit()`` returns
    the results so far, a warning says how to resume); a second SIGINT raises
    ``KeyboardInterrupt`` at once. Installed only in the main thread;
    ``TUNE_DISABLE_SIGINT_HANDLER=1`` leaves SIGINT alone (SIGUSR1 still stops), as in Ray."""

    def __init__(self) -> None:
        self.received = False
        self._previous: dict[int, Any] = {}

    @classmethod
    def install(cls) -> _StopSignal | None:
        if threading.current_thread() is not threading.main_thread():
            return None
        catcher = cls()
        signals = [getattr(signal, "SIGUSR1", None)]
        if os.environ.get("TUNE_DISABLE_SIGINT_HANDLER", "0") in ("", "0"):
            signals.append(signal.SIGINT)
        for sig in signals:
            if sig is not None:
                catcher._previous[sig] = signal.signal(sig, catcher._on_signal)
        return catcher

    def _on_signal(self, signum: int, frame: object) -> None:
        if not self.received:
            logger.warning(
                "Stop signal received (e.g. via SIGINT/Ctrl+C), ending the tuning run. "
                "This will checkpoint the experiment state one last time. Press Ctrl+C "
                "again to skip.")
        self.received = True
        if signum == signal.SIGINT:  # the next one interrupts at once
            signal.signal(signal.SIGINT, self._previous.pop(signal.SIGINT))

    def uninstall(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)
        self._previous.clear()


class _Stopped:
    action = Action.STOP
    reason = "stopped"


_STOPPED = _Stopped()


class _Finishing:
    action = Action.STOP
    reason = "done"


_FINISHING = _Finishing()


def _created_name(creator: Callable[[Any], str], trial: TuneTrial, option: str) -> str:
    """``creator(trial)``, checked: a non-empty folder-safe string."""
    name = creator(trial)
    if not isinstance(name, str) or not name.strip() or "/" in name or name in (".", ".."):
        raise ConfigError(
            f"TuneConfig({option}=...) returned {name!r} for trial {trial.trial_id}; it must "
            f"return a non-empty name without '/'."
        )
    return name


def _spliced(head: str, trials: list[str]) -> str:
    """``head`` (the state encoded with ``"trials": []`` last) with the trials' encoded
    entries in that list: the same text as encoding the whole state at once."""
    assert head.endswith("[]}")
    return head[:-2] + ", ".join(trials) + "]}"


def _ended_key(t: TuneTrial) -> tuple:
    """What an ended trial's state entry is made of: a change makes the cached entry
    stale (a restarted trial is no longer ended, so it is re-encoded). The objects
    themselves, held: compared by identity first, so a hit costs no deep comparison."""
    return (t.status, t.unfinished_status, t.name, t.index, t.path, t.experiment_tag,
            t.num_failures,
            len(t.decisions), t.job_state, t.config, t.last_result, t.checkpoint, t.error)


def _trial_state(t: TuneTrial) -> dict:
    return {
        "trial_id": t.trial_id,
        "name": t.name,
        "index": t.index,
        "status": (t.unfinished_status or t.status).value,
        "config": t.config,
        "experiment_tag": t.experiment_tag,
        "path": t.path,
        "last_result": t.last_result,
        "checkpoint": t.checkpoint.path if t.checkpoint is not None else None,
        "num_failures": t.num_failures,
        "error": f"{type(t.error).__name__}: {t.error}" if t.error is not None else None,
        "decisions": t.decisions[-100:],
        "job_state": t.job_state,
    }


def load_searcher(data: bytes) -> Searcher:
    """Rebuilds a searcher saved by the controller (its class and ``get_state()``)."""
    cls, state = cloudpickle.loads(data)
    searcher = cls.__new__(cls)
    searcher.set_state(state)
    return searcher


def trial_from_state(d: Mapping[str, Any]) -> TuneTrial:
    t = TuneTrial(d["trial_id"], d["config"], name=d["name"], path=d["path"], index=d["index"],
                  experiment_tag=d.get("experiment_tag", ""))
    t.status = TrialStatus(d["status"])
    t.last_result = d.get("last_result")
    t.checkpoint = Checkpoint(d["checkpoint"]) if d.get("checkpoint") else None
    t.num_failures = d.get("num_failures", 0)
    if d.get("error"):
        t.error = TuneError(d["error"])
    t.decisions = list(d.get("decisions") or [])
    return t


REMOTE_STATE_INTERVAL_S = 1.0  # experiment state on a URL: at most one upload a second

STATE_PERIOD_ENV = "TUNE_GLOBAL_CHECKPOINT_S"


def state_period_from_env() -> float | None:
    """Ray's ``TUNE_GLOBAL_CHECKPOINT_S``: the seconds between two writes of
    ``experiment_state.json`` while the experiment runs (it is always written at its end,
    also when it is interrupted). Unset or ``"auto"``: None, the automatic period (at most
    every 0.25 s, and no more often than keeps the writes under ~5 % of the loop's time).

    Raises:
        ConfigError: for a value that is neither ``"auto"`` nor a number of seconds >= 0.
    """
    raw = os.environ.get(STATE_PERIOD_ENV, "").strip()
    if raw.lower() in ("", "auto"):
        return None
    try:
        period = float(raw)
    except ValueError:
        period = math.nan
    if not (math.isfinite(period) and period >= 0):
        raise ConfigError(
            f"{STATE_PERIOD_ENV}={raw!r}: expected a number of seconds >= 0 between writes "
            f"of the experiment state, or 'auto'; set e.g. {STATE_PERIOD_ENV}=60, or unset it."
        )
    return period
