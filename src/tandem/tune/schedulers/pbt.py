"""``PopulationBasedTraining``: exploit good trials' checkpoints, explore their configs."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import random
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tandem._core.errors import ConfigError
from tandem.tune.schedulers._paused import PausedTrials
from tandem.tune.schedulers.base import CONTINUE, Decision, TrialScheduler, TrialSuggestion
from tandem.tune.schedulers.fifo import FIFOScheduler
from tandem.tune.search.space import Categorical, Domain, Function, is_grid_search
from tandem.tune.trial import Trial

if TYPE_CHECKING:
    from tandem.tune.controller import ControllerView

__all__ = ["PopulationBasedTraining", "PopulationBasedTrainingReplay", "explore"]

logger = logging.getLogger(__name__)


class _PBTTrialState:
    """What PBT remembers about one trial."""

    __slots__ = (
        "last_checkpoint",
        "last_perturbation_time",
        "last_result",
        "last_score",
        "last_train_time",
        "trial",
    )

    def __init__(self, trial: Trial) -> None:
        self.trial = trial
        self.last_score: float | None = None
        self.last_checkpoint: Any = None
        self.last_perturbation_time: float = 0.0
        self.last_train_time: float = 0.0
        self.last_result: dict[str, Any] | None = None


def explore(
    config: Mapping[str, Any],
    mutations: Mapping[str, Any],
    resample_probability: float,
    perturbation_factors: Sequence[float],
    rng: random.Random,
    np_rng: np.random.Generator,
    custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """A mutated deep copy of ``config`` and, per key, the operation applied (Ray's rules).

    * list/tuple (and ``tune.choice``): with ``resample_probability`` (or if the current
      value is not in it) pick a random element, else shift one step left or right.
    * Domain or callable: with ``resample_probability`` resample (``domain.sample`` /
      ``fn()``), else multiply by a random ``perturbation_factors`` entry (ints stay ints).
      The product may leave the domain's bounds, as in Ray.
    * dict: recurse into the nested config.
    """
    new_config = copy.deepcopy(dict(config))
    operations: dict[str, Any] = {}
    for key, distribution in mutations.items():
        if isinstance(distribution, Mapping):
            nested, nested_ops = explore(
                config[key],
                distribution,
                resample_probability,
                perturbation_factors,
                rng,
                np_rng,
            )
            new_config[key] = nested
            operations[key] = nested_ops
            continue
        if isinstance(distribution, Categorical):
            distribution = distribution.categories
        if isinstance(distribution, (list, tuple)):
            values = list(distribution)
            if rng.random() < resample_probability or config[key] not in values:
                new_config[key] = rng.choice(values)
                operations[key] = "resample"
            else:
                shift = rng.choice([-1, 1])
                old = values.index(config[key])
                new = min(max(old + shift, 0), len(values) - 1)
                new_config[key] = values[new]
                operations[key] = f"shift {'left' if shift == -1 else 'right'}" + (
                    " (noop)" if old == new else ""
                )
        else:  # Domain or callable (validated by the constructor)
            if rng.random() < resample_probability:
                new_config[key] = (
                    distribution.sample(np_rng)
                    if isinstance(distribution, Domain)
                    else distribution()
                )
                operations[key] = "resample"
            else:
                factor = rng.choice(list(perturbation_factors))
                value = config[key] * factor
                new_config[key] = int(value) if isinstance(config[key], int) else value
                operations[key] = f"* {factor}"
    if custom_explore_fn is not None:
        new_config = custom_explore_fn(new_config)
        if not isinstance(new_config, dict):
            raise ConfigError(
                f"PopulationBasedTraining(custom_explore_fn=...) returned {new_config!r}; it "
                "must return the new config dict."
            )
    return new_config, operations


class PopulationBasedTraining(TrialScheduler):
    """Population based training (Ray's ``PopulationBasedTraining``, asynchronous mode).

    Every ``perturbation_interval`` of ``time_attr`` (after ``burn_in_period``) a trial is
    ranked against the live population by its latest score. A trial in the top
    ``quantile_fraction`` remembers its current checkpoint (``trial.checkpoint``; the
    controller sets it before calling :meth:`on_trial_result`) as a donor checkpoint. A
    trial in the bottom quantile gets ``Decision.restart(config, checkpoint)``: the
    checkpoint of a random top-quantile donor and a mutated copy of the donor's config
    (see :func:`explore`); if that donor has no checkpoint, nothing happens. Otherwise the
    trial pauses when other trials wait (PENDING or PAUSED), so the population shares the
    cluster; paused trials resume via :meth:`suggest` when no trial is PENDING, least
    trained first.

    Every key of ``hyperparam_mutations`` must exist in the param space;
    :meth:`set_search_properties` checks it. With ``log_config`` each exploit is appended
    to :attr:`perturbations` (the controller may persist them).

    Args:
        time_attr: Result key measuring progress.
        metric: Result key to optimize (TuneConfig's when None).
        mode: ``"min"`` or ``"max"``.
        perturbation_interval: Perturb a trial every this much ``time_attr``.
        burn_in_period: No perturbation before this ``time_attr``.
        hyperparam_mutations: ``{key: list | tuple | Domain | callable | nested dict}``.
        quantile_fraction: Size of the top/bottom quantiles, in ``[0, 0.5]``.
        resample_probability: Chance of resampling instead of perturbing a value.
        perturbation_factors: Factors numeric values are multiplied by.
        custom_explore_fn: ``fn(config) -> config`` applied after the mutations.
        log_config: Record each exploit in :attr:`perturbations`.
        require_attrs: A result without ``time_attr`` or the metric is an error (else it is
            ignored).
        synch: Synchronous PBT (Ray's ``synch=True``): a trial that reaches a perturbation
            point pauses until every live trial has reached it; then all are ranked at
            once, the top quantile's checkpoints are kept, the bottom quantile restarts
            from them with explored configs, and all continue together.
        seed: Seed for PBT's own random choices.
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        perturbation_factors: tuple[float, ...] = (1.2, 0.8),
        custom_explore_fn: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        seed: int | None = None,
    ) -> None:
        super().__init__(metric, mode)
        name = type(self).__name__
        mutations = dict(hyperparam_mutations or {})
        _validate_mutations(mutations, ())
        if not mutations and custom_explore_fn is None:
            raise ConfigError(
                f"{name} needs hyperparam_mutations or custom_explore_fn (got neither). Pass "
                "e.g. hyperparam_mutations={'lr': tune.loguniform(1e-4, 1e-1)}."
            )
        if custom_explore_fn is not None and not callable(custom_explore_fn):
            raise ConfigError(f"{name}(custom_explore_fn={custom_explore_fn!r}): not callable.")
        if not 0 <= quantile_fraction <= 0.5:
            raise ConfigError(
                f"{name}(quantile_fraction={quantile_fraction!r}): must be between 0 and 0.5, "
                "e.g. 0.25."
            )
        if not perturbation_interval > 0:
            raise ConfigError(
                f"{name}(perturbation_interval={perturbation_interval!r}): must be > 0."
            )
        if burn_in_period < 0:
            raise ConfigError(f"{name}(burn_in_period={burn_in_period!r}): must be >= 0.")
        if not 0 <= resample_probability <= 1:
            raise ConfigError(
                f"{name}(resample_probability={resample_probability!r}): must be in [0, 1]."
            )
        factors = tuple(perturbation_factors)
        if not factors or not all(
            isinstance(f, (int, float)) and not isinstance(f, bool) for f in factors
        ):
            raise ConfigError(
                f"{name}(perturbation_factors={perturbation_factors!r}): must be a non-empty "
                "tuple of numbers, e.g. (1.2, 0.8)."
            )
        self._time_attr = time_attr
        self._perturbation_interval = perturbation_interval
        self._burn_in_period = burn_in_period
        self._hyperparam_mutations = mutations
        self._quantile_fraction = quantile_fraction
        self._resample_probability = resample_probability
        self._perturbation_factors = factors
        self._custom_explore_fn = custom_explore_fn
        self._log_config = log_config
        self._require_attrs = require_attrs
        if not isinstance(synch, bool):
            raise ConfigError(f"{name}(synch={synch!r}): must be True or False.")
        self._synch = synch
        self._next_perturbation_sync = max(perturbation_interval, burn_in_period)
        self._sync_waiting: set[str] = set()  # trials paused at the synchronization point
        self._queue: list[TrialSuggestion] = []
        self._rng = random.Random(seed)
        self._np_rng = np.random.default_rng(seed)
        self._trial_state: dict[str, _PBTTrialState] = {}
        self._trials = PausedTrials()
        self._num_checkpoints = 0
        self._num_perturbations = 0
        #: One entry per exploit when ``log_config``: trial ids, scores, old/new configs.
        self.perturbations: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- setup

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None = None
    ) -> bool:
        """Also checks that every ``hyperparam_mutations`` key is in ``config`` (the space).

        Raises:
            ConfigError: naming a mutation key missing from the param space.
        """
        super().set_search_properties(metric, mode, config)
        if config is not None:
            _check_keys_in_space(self._hyperparam_mutations, config, ())
        return True

    # ---------------------------------------------------------------- callbacks

    def on_trial_add(self, trial: Trial) -> None:
        self._trial_state[trial.trial_id] = _PBTTrialState(trial)
        self._trials.add(trial)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        for attr in (self._time_attr, self._metric):
            if attr not in result:
                msg = (
                    f"PopulationBasedTraining: trial {trial.trial_id} reported a result "
                    f"without {attr!r} (keys: {sorted(result)}). Report it from the training "
                    "function, or set PopulationBasedTraining(require_attrs=False) to ignore "
                    "such results."
                )
                if self._require_attrs:
                    raise ConfigError(msg)
                logger.warning(msg)
                return CONTINUE
        state = self._trial_state.get(trial.trial_id)
        if state is None:
            self.on_trial_add(trial)
            state = self._trial_state[trial.trial_id]
        time = result[self._time_attr]
        if time < self._burn_in_period:
            return CONTINUE
        if time - state.last_perturbation_time < self._perturbation_interval:
            return CONTINUE
        self._save_trial_state(state, time, result, trial)
        if self._synch:
            return self._synch_result(trial, time)
        state.last_perturbation_time = time

        lower, upper = self._quantiles()
        if trial.trial_id in upper:
            state.last_checkpoint = trial.checkpoint
            self._num_checkpoints += 1
        else:
            state.last_checkpoint = None  # not a top trial: never a donor until it is
        if trial.trial_id in lower:
            donor_id = self._rng.choice(upper)
            decision = self._exploit(state, self._trial_state[donor_id])
            if decision is not None:
                return decision
        if self._trials.others_waiting(trial):
            self._trials.mark_paused(trial)
            return Decision.pause(
                f"perturbation point at {self._time_attr}={time:g}; yielding to waiting trials"
            )
        return CONTINUE

    def on_trial_complete(self, trial: Trial, result: Mapping[str, object] | None) -> None:
        self._trials.remove(trial)
        self._trial_gone(trial)

    def on_trial_error(self, trial: Trial) -> None:
        self._trials.remove(trial)
        self._trial_gone(trial)

    def on_trial_remove(self, trial: Trial) -> None:
        self._trials.remove(trial)
        self._trial_gone(trial)

    def _trial_gone(self, trial: Trial) -> None:
        """Synchronous mode: a trial that ends before the synchronization point no longer
        holds the others back (Ray would wait for it forever)."""
        self._sync_waiting.discard(trial.trial_id)
        if not self._synch or not self._sync_waiting:
            return
        if all(
            s.trial.trial_id in self._sync_waiting
            or s.trial.status.is_terminal
            or s.trial.trial_id == trial.trial_id
            for s in self._trial_state.values()
        ):
            time = max(self._trial_state[t].last_train_time for t in self._sync_waiting)
            self._synch_perturb(None, time)

    def suggest(self) -> TrialSuggestion | None:
        if self._queue:
            return self._queue.pop(0)
        if self._synch:
            return None  # paused trials wait for the synchronization point
        return self._trials.next_resume(
            key=lambda t: (
                self._trial_state[t.trial_id].last_train_time
                if t.trial_id in self._trial_state
                else 0.0
            ),
            reason="least trained paused trial; no trial is waiting to start",
        )

    # ---------------------------------------------------------------- internals

    def _save_trial_state(
        self, state: _PBTTrialState, time: float, result: dict[str, Any], trial: Trial
    ) -> float:
        """Records the result of a trial at a perturbation point; returns its score
        (``metric_op * result[metric]``). PB2 overrides it to keep its data."""
        score = self._metric_op * float(result[self._metric])  # type: ignore[index]
        state.last_score = score
        state.last_train_time = time
        state.last_result = result
        return score

    def _synch_result(self, trial: Trial, time: float) -> Decision:
        """Synchronous mode: wait at the synchronization point, or, as the last trial to
        reach it, perturb the whole population."""
        behind = [
            s.trial.trial_id
            for s in self._trial_state.values()
            if s.trial.trial_id != trial.trial_id
            and not s.trial.status.is_terminal
            and s.last_train_time < self._next_perturbation_sync
        ]
        if behind:
            self._sync_waiting.add(trial.trial_id)
            return Decision.pause(
                f"synchronous PBT: waiting at {self._time_attr}={time:g} for {len(behind)} "
                f"trial(s) to reach {self._next_perturbation_sync:g}"
            )
        return self._synch_perturb(trial, time)

    def _synch_perturb(self, current: Trial | None, time: float) -> Decision:
        """Ranks every live trial at once: the top quantile keeps its checkpoint, the bottom
        quantile restarts from a top trial's with an explored config (Ray's order: upper,
        then the rest, then lower, so donors are recorded first). Waiting trials get their
        RESUME/RESTART suggestions; ``current`` gets the returned decision."""
        lower, upper = self._quantiles()
        live = [
            s.trial.trial_id for s in self._trial_state.values() if not s.trial.status.is_terminal
        ]
        middle = [t for t in live if t not in lower and t not in upper]
        decisions: dict[str, Decision | None] = {}
        for tid in upper + middle + lower:
            state = self._trial_state[tid]
            state.last_perturbation_time = time
            if tid in upper:
                state.last_checkpoint = state.trial.checkpoint
                self._num_checkpoints += 1
            else:
                state.last_checkpoint = None
            decisions[tid] = None
            if tid in lower:
                donor_id = self._rng.choice(upper)
                decisions[tid] = self._exploit(state, self._trial_state[donor_id])
        train_times = [s.last_train_time for s in self._trial_state.values()]
        self._next_perturbation_sync = max(
            self._next_perturbation_sync + self._perturbation_interval, max(train_times)
        )
        for tid in sorted(self._sync_waiting):
            decision = decisions.get(tid)
            if decision is not None and decision.config is not None:
                self._queue.append(
                    TrialSuggestion.restart(
                        tid, decision.config, decision.checkpoint, decision.reason
                    )
                )
            else:
                self._queue.append(
                    TrialSuggestion.resume(tid, "synchronous PBT: population perturbed")
                )
        self._sync_waiting.clear()
        if current is None:
            return CONTINUE
        return decisions.get(current.trial_id) or CONTINUE

    def _get_new_config(self, trial: Trial, donor_trial: Trial) -> tuple[dict[str, object], object]:
        """The config ``trial`` continues with after cloning ``donor_trial`` and the
        operations applied (PBT: :func:`explore`; PB2 overrides it)."""
        return explore(
            donor_trial.config,
            self._hyperparam_mutations,
            self._resample_probability,
            self._perturbation_factors,
            self._rng,
            self._np_rng,
            self._custom_explore_fn,
        )

    def bind_controller_view(self, view: ControllerView) -> None:
        """Called by the tune controller: where the experiment folder is, for the policy
        files (``pbt_global.txt``, ``pbt_policy_<trial_id>.txt``, Ray's)."""
        self._experiment_path = getattr(view, "experiment_path", None)

    def _log_policy(self, state: _PBTTrialState, donor: _PBTTrialState,
                    new_config: dict[str, object]) -> None:
        """Ray's policy log: one JSON row ``[trial tag, donor tag, trial iteration, donor
        iteration, donor config, new config]`` in ``pbt_global.txt``; the donor's policy
        file copied to the trial's, then the row appended to it (what
        ``PopulationBasedTrainingReplay`` replays)."""
        path = getattr(self, "_experiment_path", None)
        if not path or "://" in path:
            return
        import json
        import os
        import shutil

        trial, donor_trial = state.trial, donor.trial
        row = [trial.experiment_tag, donor_trial.experiment_tag,
               (state.last_result or {}).get("training_iteration", 0),
               (donor.last_result or {}).get("training_iteration", 0),
               donor_trial.config, new_config]
        line = json.dumps(row, default=str)
        try:
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "pbt_global.txt"), "a") as f:
                print(line, file=f)
            mine = os.path.join(path, f"pbt_policy_{trial.trial_id}.txt")
            theirs = os.path.join(path, f"pbt_policy_{donor_trial.trial_id}.txt")
            if os.path.exists(theirs):
                shutil.copyfile(theirs, mine)
            with open(mine, "a") as f:
                print(line, file=f)
        except OSError as e:  # the experiment goes on without its policy log
            logger.warning("PBT: could not write the policy log in %s: %s", path, e)

    def _quantiles(self) -> tuple[list[str], list[str]]:
        """(bottom, top) trial ids among unfinished trials with a score, worst first.

        A NaN score ranks nowhere (Ray's rule): it would sort arbitrarily and could make a
        diverged trial the donor of a healthy one.
        """
        scored = [
            s
            for s in self._trial_state.values()
            if s.last_score is not None
            and not math.isnan(s.last_score)
            and not s.trial.status.is_terminal
        ]
        scored.sort(key=lambda s: s.last_score)  # type: ignore[arg-type, return-value]
        if len(scored) <= 1:
            return [], []
        n = math.ceil(len(scored) * self._quantile_fraction)
        if n > len(scored) / 2:
            n = math.floor(len(scored) / 2)
        ids = [s.trial.trial_id for s in scored]
        return ids[:n], ids[len(ids) - n :]

    def _exploit(self, state: _PBTTrialState, donor: _PBTTrialState) -> Decision | None:
        trial, donor_trial = state.trial, donor.trial
        if donor.last_checkpoint is None:
            logger.info(
                "PBT: donor trial %s has no checkpoint; not exploiting it for trial %s",
                donor_trial.trial_id,
                trial.trial_id,
            )
            return None
        new_config, operations = self._get_new_config(trial, donor_trial)
        reason = (
            f"exploit: cloning trial {donor_trial.trial_id} (score {donor.last_score:.6g}) into "
            f"trial {trial.trial_id} (score {state.last_score:.6g}); explore: {operations}"
        )
        logger.info("[PopulationBasedTraining] %s", reason)
        if self._log_config:
            self.perturbations.append(
                {
                    "trial_id": trial.trial_id,
                    "donor_trial_id": donor_trial.trial_id,
                    "time": state.last_train_time,
                    "score": state.last_score,
                    "donor_score": donor.last_score,
                    "old_config": trial.config,
                    "new_config": new_config,
                    "operations": operations,
                }
            )
            self._log_policy(state, donor, new_config)
        self._num_perturbations += 1
        # The clone continues from the donor's point in time.
        state.last_perturbation_time = donor.last_perturbation_time
        state.last_train_time = donor.last_train_time
        return Decision.restart(new_config, donor.last_checkpoint, reason)

    def debug_string(self) -> str:
        return (
            f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, "
            f"{self._num_perturbations} perturbs"
        )


def _validate_mutations(mutations: Mapping[str, object], path: tuple[str, ...]) -> None:
    for key, value in mutations.items():
        where = "/".join((*path, str(key)))
        if isinstance(value, Function):
            raise ConfigError(
                f"PopulationBasedTraining(hyperparam_mutations): {where!r} is a "
                "tune.sample_from(...), which PBT cannot resample. Use tune.uniform, "
                "tune.loguniform, tune.choice, a list, or a zero-argument function."
            )
        if is_grid_search(value):
            raise ConfigError(
                f"PopulationBasedTraining(hyperparam_mutations): {where!r} is a grid_search; "
                "use a list of values instead."
            )
        if isinstance(value, Mapping):
            _validate_mutations(value, (*path, str(key)))
        elif isinstance(value, (list, tuple)):
            if not value:
                raise ConfigError(
                    f"PopulationBasedTraining(hyperparam_mutations): {where!r} is an empty list."
                )
        elif not (isinstance(value, Domain) or callable(value)):
            raise ConfigError(
                f"PopulationBasedTraining(hyperparam_mutations): {where!r} is {value!r} "
                f"({type(value).__name__}); each value must be a list, a tuple, a dict, a "
                "tune search-space object (tune.uniform(...), ...) or a zero-argument function."
            )


def _check_keys_in_space(
    mutations: Mapping[str, object], space: Mapping[str, object], path: tuple[str, ...]
) -> None:
    for key, value in mutations.items():
        where = "/".join((*path, str(key)))
        if key not in space:
            level = "/".join(path) or "the top level"
            raise ConfigError(
                f"PopulationBasedTraining(hyperparam_mutations): key {where!r} is not in the "
                f"param space. Keys at {level}: {sorted(map(str, space))}. Add {where!r} to "
                "param_space (e.g. with its initial distribution) or fix the key; nest keys "
                "as in param_space, e.g. {'train_loop_config': {'lr': [...]}}."
            )
        if isinstance(value, Mapping):
            sub = space[key]
            if not isinstance(sub, Mapping) or is_grid_search(sub):
                raise ConfigError(
                    f"PopulationBasedTraining(hyperparam_mutations): {where!r} is a dict of "
                    f"mutations, but param_space[{where!r}] is {sub!r}, not a dict."
                )
            _check_keys_in_space(value, sub, (*path, str(key)))


class PopulationBasedTrainingReplay(FIFOScheduler):
    """Replays the config schedule a PBT run found for one trial (Ray's).

    ``policy_file`` is a ``pbt_policy_<trial_id>.txt`` that ``PopulationBasedTraining``
    (with ``log_config=True``, the default) wrote in the experiment folder. The one trial
    of the replay run starts with the schedule's first config, whatever ``param_space``
    says; at each recorded step it is restarted from its latest checkpoint with the next
    config (Ray pauses it, saves and changes the config). Use ``num_samples=1``.
    """

    def __init__(self, policy_file: str) -> None:
        super().__init__()
        path = Path(policy_file).expanduser()
        if not path.exists():
            raise ValueError(f"Policy file not found: {path.as_posix()}")
        self.policy_file = path.as_posix()
        initial_config, self._policy = self._load_policy(self.policy_file)
        self.experiment_tag = f"replay_{os.path.basename(self.policy_file)}"
        self.config = initial_config
        self.current_config = self.config
        self._trial: Trial | None = None
        self._current_step = 0
        self._num_perturbations = 0
        self._policy_iter = iter(self._policy)
        self._next_policy = next(self._policy_iter, None)

    def _load_policy(self, policy_file: str) -> tuple[dict[str, object], list[tuple[int, dict]]]:
        raw_policy = []
        with open(policy_file) as fp:
            for row in fp.readlines():
                try:
                    parsed_row = json.loads(row)
                except json.JSONDecodeError:
                    raise ValueError(f"Could not read PBT policy file: {policy_file}.") from None
                raw_policy.append(tuple(parsed_row))
        # Loop through policy from end to start to obtain the trial's own schedule
        policy: list[tuple[int, dict]] = []
        last_new_tag = None
        last_old_conf: dict[str, Any] = {}
        for old_tag, new_tag, _old_step, new_step, old_conf, new_conf in reversed(raw_policy):
            if last_new_tag and old_tag != last_new_tag:
                break  # a donor's earlier history: this trial's schedule starts here
            last_new_tag = new_tag
            last_old_conf = old_conf
            policy.append((new_step, new_conf))
        return last_old_conf, list(reversed(policy))

    def on_trial_add(self, trial: Trial) -> None:
        if self._trial is not None:
            raise ValueError(
                "More than one trial added to PBT replay run. This means the same schedule "
                "will be trained multiple times. Do you want to set `n_samples=1`?"
            )
        self._trial = trial
        if trial.config and self._policy:
            logger.warning("Trial was initialized with a config, which was overwritten. Did "
                           "you start the PBT replay with a `config` parameter?")
        elif trial.config and not self._policy:
            self.config = trial.config
        elif not trial.config and not self._policy:
            raise ValueError(
                "No replay policy found and trial initialized without a valid config. Either "
                "pass a `config` argument to `tune.Tuner()` or consider not using PBT replay "
                "for this run."
            )

    def initial_config(self, trial: Trial) -> dict[str, Any]:
        """The config the trial starts with (the controller asks before launching it)."""
        return copy.deepcopy(self.config)

    def on_trial_result(self, trial: Trial, result: dict[str, Any]) -> Decision:
        if "training_iteration" not in result or not self._next_policy:
            return CONTINUE
        step = result["training_iteration"]
        self._current_step = step
        change_at, new_config = self._next_policy
        if step < change_at:
            return CONTINUE
        logger.info("Population Based Training replay is now at step %s. Configuration will "
                    "be changed to %s.", step, new_config)
        self.current_config = new_config
        self._num_perturbations += 1
        self._next_policy = next(self._policy_iter, None)
        return Decision.restart(dict(new_config), trial.checkpoint,
                                f"PBT replay: config changed at step {step}")

    def debug_string(self) -> str:
        return (f"PopulationBasedTraining replay: Step {self._current_step}, perturb "
                f"{self._num_perturbations}")
