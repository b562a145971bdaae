"""``OptunaSearch``: Optuna samplers (TPE by default) behind the ``Searcher`` interface."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem._core.extras import import_optional
from tandem.tune.search.searcher import Searcher
from tandem.tune.search.space import Categorical, Domain, Float, Function, Integer
from tandem.tune.search.variant_generator import (
    Path,
    _copy_containers,
    _set_path,
    _unresolved,
    flatten_dict,
    has_search_space,
    make_rng,
    path_str,
    resolve_config,
    validate_param_space,
)

if TYPE_CHECKING:
    import optuna as ot

__all__ = ["OptunaSearch"]

logger = logging.getLogger(__name__)


def _import_optuna() -> ModuleType:
    return import_optional("optuna", "optuna", "OptunaSearch")


_PRIMITIVES = (str, int, float, bool, type(None))


def _identity(value: object) -> object:
    return value


@dataclass(frozen=True)
class _Param:
    """One Optuna parameter: its name, where it goes in the config, and value mappings."""

    name: str
    path: Path
    distribution: Any
    to_config: Callable[[Any], Any] = _identity
    to_optuna: Callable[[Any], Any] = _identity


def _to_param(optuna: Any, path: Path, domain: Domain) -> _Param:
    name = path_str(path)
    dists = optuna.distributions
    if isinstance(domain, Float) and domain.mean is None:  # normal floats: not in Optuna
        if domain.log:
            dist = dists.FloatDistribution(domain.lower, domain.upper, log=True)
            if domain.q is not None:
                # Optuna cannot quantize a log distribution; round the value we hand out.
                q = domain.q
                return _Param(
                    name, path, dist, to_config=lambda v: float(round(round(v / q) * q, 12))
                )
            return _Param(name, path, dist)
        dist = dists.FloatDistribution(domain.lower, domain.upper, step=domain.q)
        if domain.q is not None:  # Optuna's grid values carry float noise (0.30000000000000004)
            return _Param(name, path, dist, to_config=lambda v: float(round(v, 12)))
        return _Param(name, path, dist)
    if isinstance(domain, Integer):
        if domain.q is not None:
            low = math.ceil(domain.low / domain.q) * domain.q
            high = math.floor(domain.high / domain.q) * domain.q
            return _Param(name, path, dists.IntDistribution(low, high, step=domain.q))
        return _Param(name, path, dists.IntDistribution(domain.low, domain.high, log=domain.log))
    if isinstance(domain, Categorical):
        cats = domain.categories
        if all(isinstance(c, _PRIMITIVES) for c in cats):
            return _Param(name, path, dists.CategoricalDistribution(cats))
        # Optuna only stores primitive choices: let it choose an index.
        return _Param(
            name,
            path,
            dists.CategoricalDistribution(list(range(len(cats)))),
            to_config=lambda i: cats[i],
            to_optuna=lambda v: next(i for i, c in enumerate(cats) if c == v),
        )
    raise ConfigError(
        f"OptunaSearch: {name!r} is {domain!r}, which Optuna cannot sample. Supported: "
        "uniform, quniform, loguniform, qloguniform, randint, qrandint, lograndint, choice "
        "(and sample_from, evaluated after the others). Replace it, or use the default searcher."
    )


def _check_objectives(metric: Any, mode: Any) -> None:
    """Multi-objective search needs a list of metrics and a list of modes of one length."""
    multi = isinstance(metric, (list, tuple)), isinstance(mode, (list, tuple))
    if not any(multi):
        return
    if not all(multi) or len(metric) != len(mode):
        raise ConfigError(
            f"OptunaSearch(metric={metric!r}, mode={mode!r}): for multi-objective search "
            "give a list of metrics and a list of modes of the same length, e.g. "
            "metric=['loss', 'accuracy'], mode=['min', 'max']."
        )


class OptunaSearch(Searcher):
    """Searches with an Optuna sampler through Optuna's ask/tell interface.

    The space comes either from the Tuner's ``param_space`` (tandem domains; constants are
    passed through, ``sample_from`` values are computed after Optuna has chosen the rest)
    or from ``space``; not both. ``space`` may be a dict of tandem domains or Optuna
    distributions (nested dicts become ``"a/b"`` parameter names), or a define-by-run
    function ``space(optuna_trial) -> dict | None`` whose returned dict holds constants to
    add. ``grid_search`` and ``randn`` are not supported.

    Multi-objective search: ``metric=["loss", "accuracy"], mode=["min", "max"]`` (lists of
    one length) creates a study with one direction per metric; each completed trial tells
    Optuna all its values, and ``study.best_trials`` is the Pareto front. Pick a result
    per objective with ``ResultGrid.get_best_result(metric, mode)``.

    The controller counts ``num_samples`` (``set_num_samples`` returns False). Optuna is
    imported when the searcher is created.

    Args:
        space: Search space; None to use the Tuner's ``param_space``.
        metric: Metric to optimize (TuneConfig's when None).
        mode: ``"min"`` or ``"max"`` (TuneConfig's when None).
        points_to_evaluate: Partial configs to try first (enqueued in the study).
        sampler: An Optuna sampler; default ``TPESampler(seed=seed)``.
        study_name: The Optuna study's name (default ``"optuna"``, as Ray's).
        storage: An ``optuna.storages.BaseStorage`` (e.g. ``RDBStorage``) for the study;
            an existing study of that name there is loaded and continued.
        seed: Seed for the default sampler.
        evaluated_rewards: The metric values of ``points_to_evaluate``, already evaluated:
            they are added to the study as completed trials instead of being run.
    """

    def __init__(
        self,
        space: Mapping[str, Any] | Callable[[Any], Any] | None = None,
        metric: str | list[str] | None = None,
        mode: str | list[str] | None = None,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        sampler: Any = None,
        study_name: str | None = None,
        storage: Any = None,
        seed: int | None = None,
        evaluated_rewards: Sequence[Any] | None = None,
    ) -> None:
        optuna = _import_optuna()
        super().__init__(metric=metric, mode=mode)
        _check_objectives(metric, mode)
        if space is not None and not (isinstance(space, Mapping) or callable(space)):
            raise ConfigError(
                f"OptunaSearch(space={space!r}): space must be a dict of search-space objects, "
                "or a define-by-run function taking an optuna Trial."
            )
        if sampler is not None and not isinstance(sampler, optuna.samplers.BaseSampler):
            raise ConfigError(
                f"OptunaSearch(sampler={sampler!r}): sampler must be an optuna sampler, e.g. "
                "optuna.samplers.TPESampler(seed=0)."
            )
        if sampler is not None and seed is not None:
            logger.warning(
                "OptunaSearch: both `sampler` and `seed` were given; `seed` is ignored. "
                "Pass the seed to the sampler itself, e.g. TPESampler(seed=%s).",
                seed,
            )
        if storage is not None and not isinstance(storage, optuna.storages.BaseStorage):
            raise ConfigError(
                f"OptunaSearch(storage={storage!r}): The `storage` parameter in "
                f"`OptunaSearcher` must be an instance of `optuna.storages.BaseStorage` (e.g. "
                f"optuna.storages.RDBStorage('sqlite:///optuna.db'))."
            )
        if evaluated_rewards is not None and len(evaluated_rewards) != len(
                points_to_evaluate or []):
            raise ConfigError(
                f"OptunaSearch(evaluated_rewards=...): {len(evaluated_rewards)} rewards for "
                f"{len(points_to_evaluate or [])} points_to_evaluate; give one reward per point "
                f"(its metric value, a list of values for several metrics)."
            )
        if evaluated_rewards and callable(space) and not isinstance(space, Mapping):
            raise ConfigError(
                "Define-by-run function passed in `space` argument is not yet supported when "
                "using `evaluated_rewards`. Please provide an `OptunaDistribution` dict or pass "
                "a Ray Tune search space to `tune.Tuner()`."
            )
        self._study_name = study_name or "optuna"  # Ray's fixed name for in-memory storage
        self._storage = storage
        self._rewards = list(evaluated_rewards) if evaluated_rewards else None
        self._space = space
        self._points = [dict(p) for p in points_to_evaluate or []]
        self._sampler = sampler if sampler is not None else optuna.samplers.TPESampler(seed=seed)
        self._rng = make_rng(seed)
        self._spec: dict[str, Any] = {}
        self._params: list[_Param] = []
        self._study: ot.Study | None = None
        self._ot_trials: dict[str, Any] = {}

    @staticmethod
    def convert_search_space(spec: Mapping[str, object]) -> dict[str, Any]:
        """Ray's ``OptunaSearch.convert_search_space``: the search-space objects of ``spec``
        as Optuna distributions, keyed by their ``"a/b"`` path (constants are left out); the
        result can be passed as ``OptunaSearch(space=...)``."""
        optuna = _import_optuna()
        found = list(_unresolved(_copy_containers(dict(spec)), ()))
        if any(not isinstance(value, Domain) for _, value in found):
            raise ValueError(
                "Grid search parameters cannot be automatically converted to an Optuna "
                "search space.")
        return {
            "/".join(str(k) for k in path): _to_param(optuna, path, value).distribution
            for path, value in found
            if not isinstance(value, Function)
        }

    # ---------------------------------------------------------------- setup

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict[str, Any] | None, **spec: object
    ) -> bool:
        super().set_search_properties(metric, mode, config)
        validate_param_space(config)
        config = dict(config or {})
        if self._space is not None and has_search_space(config):
            # Ray's contract: a searcher built with its own space takes no other; it answers
            # False and the Tuner refuses the param_space with Ray's message.
            return False
        self._setup(config)
        return True

    def _setup(self, config: dict[str, object]) -> None:
        optuna = _import_optuna()
        if self._metric is None or self._mode is None:
            raise ConfigError(
                f"OptunaSearch needs a metric and a mode (got metric={self._metric!r}, "
                f"mode={self._mode!r}). Pass them to OptunaSearch(metric=..., mode=...) or to "
                "TuneConfig(metric=..., mode=...)."
            )
        spec = _copy_containers(config)
        params: list[_Param] = []
        if isinstance(self._space, Mapping):
            validate_space = {
                k: v
                for k, v in flatten_dict(self._space).items()
                if not isinstance(v, optuna.distributions.BaseDistribution)
            }
            validate_param_space(validate_space, name="OptunaSearch(space)")
            for name, value in flatten_dict(self._space).items():
                path = tuple(name.split("/"))
                self._ensure_parent(spec, path)
                _set_path(spec, path, value)
        for path, value in list(_unresolved(spec, ())):
            if isinstance(value, Function):
                continue
            if isinstance(value, Domain):
                params.append(_to_param(optuna, path, value))
            else:
                raise ConfigError(
                    f"OptunaSearch: {path_str(path)!r} is a grid_search, which Optuna does not "
                    "support. Use tune.choice([...]) instead, or the default searcher for grid "
                    "search."
                )
        if isinstance(self._space, Mapping):
            for name, value in flatten_dict(self._space).items():
                if isinstance(value, optuna.distributions.BaseDistribution):
                    params.append(_Param(name, tuple(name.split("/")), value))
        if (
            not params
            and not callable(self._space)
            and not any(isinstance(v, Function) for _, v in _unresolved(spec, ()))
        ):
            raise ConfigError(
                "OptunaSearch has nothing to search: neither its `space` nor the param_space "
                "holds search-space objects. Add e.g. {'lr': tune.loguniform(1e-4, 1e-1)} to "
                "param_space."
            )
        self._spec = spec
        self._params = params
        _check_objectives(self._metric, self._mode)
        if isinstance(self._mode, (list, tuple)):  # multi-objective: one direction each
            directions = ["minimize" if m == "min" else "maximize" for m in self._mode]
            self._study = optuna.create_study(
                sampler=self._sampler, directions=directions, storage=self._storage,
                study_name=self._study_name, load_if_exists=True)
        else:
            direction = "minimize" if self._mode == "min" else "maximize"
            self._study = optuna.create_study(
                sampler=self._sampler, direction=direction, storage=self._storage,
                study_name=self._study_name, load_if_exists=True)
        by_name = {p.name: p for p in params}
        for index, point in enumerate(self._points):
            flat = flatten_dict(point)
            if not callable(self._space):
                unknown = sorted(set(flat) - set(by_name))
                if unknown:
                    raise ConfigError(
                        f"OptunaSearch(points_to_evaluate=...): {unknown} are not searched "
                        f"parameters; the searched parameters are {sorted(by_name)}."
                    )
            values = {k: by_name[k].to_optuna(v) if k in by_name else v for k, v in flat.items()}
            if self._rewards is None:
                self._study.enqueue_trial(values)
                continue
            # Ray's add_evaluated_point: a completed trial the sampler learns from
            reward = self._rewards[index]
            self._study.add_trial(optuna.trial.create_trial(
                params=values, distributions={k: by_name[k].distribution for k in values
                                              if k in by_name},
                **({"values": list(reward)} if isinstance(reward, (list, tuple))
                   else {"value": reward})))

    @staticmethod
    def _ensure_parent(spec: dict[str, Any], path: Path) -> None:
        node = spec
        for key in path[:-1]:
            node = node.setdefault(key, {})
            if not isinstance(node, dict):
                raise ConfigError(
                    f"OptunaSearch(space): {path_str(path)!r} is nested under a param_space "
                    "value that is not a dict."
                )

    # ---------------------------------------------------------------- searching

    def suggest(self, trial_id: str) -> dict[str, Any] | str | None:
        if self._study is None:
            # Created with everything it needs and used without a controller handshake.
            self._setup({})
        assert self._study is not None
        dists = {p.name: p.distribution for p in self._params}
        ot_trial = self._study.ask(fixed_distributions=dists)
        self._ot_trials[trial_id] = ot_trial
        if callable(self._space) and not isinstance(self._space, Mapping):
            extra = self._space(ot_trial) or {}
            config = _copy_containers(self._spec)
            for name, value in ot_trial.params.items():
                path = tuple(name.split("/"))
                self._ensure_parent(config, path)
                _set_path(config, path, value)
            config.update(extra)
            return config
        fixed = {p.path: p.to_config(ot_trial.params[p.name]) for p in self._params}
        config, _ = resolve_config(self._spec, self._rng, fixed=fixed)
        return config

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if isinstance(self._metric, (list, tuple)):
            return  # Optuna takes no intermediate values in multi-objective studies (as Ray)
        ot_trial = self._ot_trials.get(trial_id)
        step = result.get("training_iteration")
        value = result.get(self._metric) if self._metric else None
        if ot_trial is None or step is None or not isinstance(value, (int, float)):
            return
        try:  # intermediate values serve Optuna pruners; a repeated step is not an error
            ot_trial.report(float(value), int(step))
        except Exception:  # noqa: BLE001
            logger.debug("OptunaSearch: could not report step %s of %s", step, trial_id)

    def on_trial_complete(
        self, trial_id: str, result: Mapping[str, object] | None = None, error: bool = False
    ) -> None:
        optuna = _import_optuna()
        ot_trial = self._ot_trials.pop(trial_id, None)
        if ot_trial is None or self._study is None:
            return
        value: Any
        if isinstance(self._metric, (list, tuple)):
            values: list[Any] = [(result or {}).get(m) for m in self._metric]
            value = None if any(v is None for v in values) else [float(v) for v in values]
        else:
            value = (result or {}).get(self._metric) if self._metric else None
        if error or value is None:
            if not error:
                logger.warning(
                    "OptunaSearch: trial %s ended without reporting metric %r; it is recorded "
                    "as failed.",
                    trial_id,
                    self._metric,
                )
            self._study.tell(ot_trial, state=optuna.trial.TrialState.FAIL)
            return
        self._study.tell(ot_trial, value if isinstance(value, list) else float(value))

    @property
    def study(self) -> Any:
        """The underlying ``optuna.Study`` (None before setup)."""
        return self._study
