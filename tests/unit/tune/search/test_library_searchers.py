"""The library searchers (HyperOpt, BayesOpt, Ax, Nevergrad, ZOOpt, BOHB) steer the search.

Each searcher is driven the way the tune controller drives it (set_search_properties,
suggest, on_trial_complete) on a 2-D quadratic; over several seeds, the median of the best
value it finds beats the median of random search (BasicVariantGenerator) with the same
number of trials. Also: the param space's constants and sample_from values reach the
config, the conversion matches Ray's, and wrong input is refused before work starts.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from tandem import tune
from tandem._core.errors import ConfigError
from tandem.tune.search import BasicVariantGenerator, ConcurrencyLimiter, Repeater, Searcher

SPACE = {
    "x": tune.uniform(-5, 5),
    "y": tune.uniform(-5, 5),
    "const": 3,
    "double_x": tune.sample_from(lambda spec: spec.config.x * 2),
}


def _loss(config: dict[str, Any]) -> float:
    return (config["x"] - 1) ** 2 + (config["y"] + 2) ** 2


def _best_found(searcher: Searcher, trials: int) -> float:
    """Runs ``trials`` trials one after the other, as the controller would."""
    searcher.set_search_properties("loss", "min", dict(SPACE))
    searcher.set_num_samples(trials)
    best = float("inf")
    for i in range(trials):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict), f"{type(searcher).__name__} suggested {config!r}"
        assert config["const"] == 3 and config["double_x"] == config["x"] * 2
        assert type(config["x"]) is float  # plain numbers: configs are written as JSON
        value = _loss(config)
        best = min(best, value)
        searcher.on_trial_complete(f"t{i}", {"loss": value, "training_iteration": 1})
    return best


def _random_median(trials: int, seeds: int) -> float:
    return statistics.median(
        _best_found(BasicVariantGenerator(random_state=1000 + s), trials) for s in range(seeds)
    )


def _steers(make: Callable[[int], Searcher], trials: int, seeds: int) -> tuple[float, float]:
    found = []
    for seed in range(seeds):
        np.random.seed(seed)  # ZOOpt and BayesOpt's acquisition draw from NumPy's generator
        found.append(_best_found(make(seed), trials))
    return statistics.median(found), _random_median(trials, seeds)


def _hyperopt(seed: int) -> Searcher:
    from tandem.tune.search.hyperopt import HyperOptSearch

    return HyperOptSearch(random_state_seed=seed, n_initial_points=8)


def _nevergrad(seed: int) -> Searcher:
    import nevergrad as ng

    from tandem.tune.search.nevergrad import NevergradSearch

    ng.optimizers.registry  # noqa: B018 - imported for its side effect in some versions
    return NevergradSearch(optimizer=ng.optimizers.OnePlusOne)


def _zoopt(seed: int) -> Searcher:
    from tandem.tune.search.zoopt import ZOOptSearch

    return ZOOptSearch(algo="Asracos", budget=25)


def _bohb(seed: int) -> Searcher:
    from tandem.tune.search.bohb import TuneBOHB

    return TuneBOHB(seed=seed)


@pytest.mark.parametrize(
    "make", [_hyperopt, _nevergrad, _zoopt, _bohb], ids=["hyperopt", "nevergrad", "zoopt", "bohb"]
)
def test_searcher_beats_random_search(make):
    found, random = _steers(make, trials=25, seeds=5)
    assert found < random, f"median best {found:.3f} vs random search {random:.3f}"


@pytest.mark.slow
def test_bayesopt_beats_random_search():
    from tandem.tune.search.bayesopt import BayesOptSearch

    found, random = _steers(
        lambda s: BayesOptSearch(random_state=s, random_search_steps=5), trials=12, seeds=3
    )
    assert found < random, f"median best {found:.3f} vs random search {random:.3f}"


@pytest.mark.slow
@pytest.mark.timeout(300)  # BoTorch fits a GP per suggestion: 60-100 s on a loaded 2-core CI
def test_ax_beats_random_search():
    pytest.importorskip("ax")
    from tandem.tune.search.ax import AxSearch

    # AxClient's random_seed seeds Sobol and BoTorch's acquisition: the same suggestions on
    # every run (unseeded, 8 trials over 2 seeds lost to random search in one CI run)
    found, random = _steers(
        lambda s: AxSearch(random_seed=s, verbose_logging=False), trials=10, seeds=3
    )
    assert found < random, f"median best {found:.3f} vs random search {random:.3f}"


def test_conversion_matches_a_space_given_to_the_searcher():
    """Ray's test: a converted space given to the constructor and the same space given as
    param_space suggest the same configs."""
    from tandem.tune.search.hyperopt import HyperOptSearch

    space = {"a": {"b": tune.uniform(0, 1), "c": tune.choice(["x", "y"])}, "d": tune.randint(0, 9)}
    converted = HyperOptSearch.convert_search_space(space)
    one = HyperOptSearch(space=converted, metric="m", mode="max", random_state_seed=1)
    two = HyperOptSearch(metric="m", mode="max", random_state_seed=1)
    two.set_search_properties(None, None, space)
    c1, c2 = one.suggest("0"), two.suggest("0")
    assert c1 == c2
    assert 0 <= c1["a"]["b"] <= 1 and c1["a"]["c"] in ("x", "y") and 0 <= c1["d"] < 9


def test_int_and_log_domains_keep_their_bounds():
    import nevergrad as ng

    from tandem.tune.search.nevergrad import NevergradSearch
    from tandem.tune.search.zoopt import ZOOptSearch

    ints = {"n": tune.randint(2, 4), "q": tune.choice([1, 5])}
    logs = {**ints, "lr": tune.loguniform(1e-4, 1e-2)}
    for searcher, space in (
        (NevergradSearch(optimizer=ng.optimizers.RandomSearch, metric="m", mode="min"), logs),
        (ZOOptSearch(budget=10, metric="m", mode="min"), ints),
    ):
        searcher.set_search_properties(None, None, space)
        for i in range(4):
            c = searcher.suggest(str(i))
            if c is None:
                continue
            assert c["n"] in (2, 3) and c["q"] in (1, 5), c
            assert 1e-4 <= c.get("lr", 1e-3) <= 1e-2, c
            searcher.on_trial_complete(str(i), {"m": 1.0})
    with pytest.raises(ValueError, match="ZOOpt does not support"):  # as in Ray
        ZOOptSearch(budget=10, metric="m", mode="min").set_search_properties(None, None, logs)


def test_space_in_both_places_is_refused(tmp_path):
    from tandem.tune.search.hyperopt import HyperOptSearch

    searcher = HyperOptSearch(space=HyperOptSearch.convert_search_space({"x": tune.uniform(0, 1)}),
                              metric="m", mode="min")
    assert searcher.set_search_properties(None, None, {"y": tune.uniform(0, 1)}) is False
    tuner = tune.Tuner(lambda config: None, param_space={"y": tune.uniform(0, 1)},
                       tune_config=tune.TuneConfig(search_alg=searcher),
                       run_config=tune.RunConfig(storage_path=str(tmp_path)))
    with pytest.raises(ConfigError, match="already instantiated with a search space"):
        tuner.fit()  # before any trial starts (Ray's check)


def test_a_list_metric_is_refused_by_single_objective_searchers():
    from tandem.tune.search.hyperopt import HyperOptSearch

    with pytest.raises(ConfigError, match="multi-objective"):
        HyperOptSearch(metric=["a", "b"], mode=["min", "max"])


def test_hebo_says_why_it_is_unavailable():
    from tandem.tune.search.hebo import HEBOSearch

    try:
        import hebo.optimizers.hebo  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="numpy<1.25.*OptunaSearch"):
            HEBOSearch(metric="m", mode="min")
    else:  # pragma: no cover - an environment where HEBO imports
        HEBOSearch(metric="m", mode="min")


def test_concurrency_limiter_holds_back_a_library_searcher():
    from tandem.tune.search.hyperopt import HyperOptSearch

    limiter = ConcurrencyLimiter(HyperOptSearch(random_state_seed=0), max_concurrent=2)
    limiter.set_search_properties("loss", "min", dict(SPACE))
    assert isinstance(limiter.suggest("a"), dict) and isinstance(limiter.suggest("b"), dict)
    assert limiter.suggest("c") is None  # at the cap: the library is not asked
    assert len(limiter.searcher._hpopt_trials.trials) == 2  # type: ignore[attr-defined]
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert isinstance(limiter.suggest("c"), dict)


def test_concurrency_limiter_batch_reports_the_batch_at_once():
    inner = BasicVariantGenerator(random_state=0)
    seen: list[str] = []
    inner.on_trial_complete = lambda tid, result=None, error=False: seen.append(tid)  # type: ignore[method-assign]
    limiter = ConcurrencyLimiter(inner, max_concurrent=2, batch=True)
    limiter.set_search_properties("loss", "min", {"x": tune.uniform(0, 1)})
    limiter.set_num_samples(10)
    limiter.suggest("a"), limiter.suggest("b")
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert seen == [] and limiter.suggest("c") is None  # the batch is not complete yet
    limiter.on_trial_complete("b", {"loss": 2.0})
    assert seen == ["a", "b"] and isinstance(limiter.suggest("c"), dict)


def test_bohb_limits_concurrency_itself():
    """TuneBOHB takes the cap (set_max_concurrency) and counts paused trials out."""
    from tandem.tune.search.bohb import TuneBOHB

    limiter = ConcurrencyLimiter(TuneBOHB(seed=0), max_concurrent=1)
    limiter.set_search_properties("loss", "min", {"x": tune.uniform(0, 1)})
    assert isinstance(limiter.suggest("a"), dict)
    assert limiter.suggest("b") is None
    limiter.on_pause("a")
    assert isinstance(limiter.suggest("b"), dict)


def test_repeater_runs_each_config_repeat_times_and_reports_the_mean():
    from tandem.tune.search.hyperopt import HyperOptSearch

    inner = HyperOptSearch(random_state_seed=0)
    rep = Repeater(inner, repeat=3)
    rep.set_search_properties("loss", "min", {"x": tune.uniform(0, 1)})
    configs = [rep.suggest(f"t{i}") for i in range(3)]
    assert [c["__trial_index__"] for c in configs] == [0, 1, 2]  # type: ignore[index]
    assert len({c["x"] for c in configs}) == 1  # type: ignore[index]
    for i, loss in enumerate([1.0, 2.0, 6.0]):
        rep.on_trial_complete(f"t{i}", {"loss": loss})
    done = [t for t in inner._hpopt_trials.trials if t["result"].get("loss") is not None]
    assert len(done) == 1 and done[0]["result"]["loss"] == pytest.approx(3.0)
    with pytest.raises(ConfigError, match="repeat"):
        Repeater(inner, repeat=0)


def test_save_and_restore_keep_the_library_state(tmp_path):
    from tandem.tune.search.hyperopt import HyperOptSearch

    one = HyperOptSearch(metric="loss", mode="min", random_state_seed=0)
    one.set_search_properties(None, None, {"x": tune.uniform(0, 1)})
    for i in range(3):
        c = one.suggest(str(i))
        one.on_trial_complete(str(i), {"loss": c["x"]})  # type: ignore[index]
    path = tmp_path / "searcher.pkl"
    one.save(str(path))
    two = HyperOptSearch(metric="loss", mode="min")
    two.set_search_properties(None, None, {"x": tune.uniform(0, 1)})
    two.restore(str(path))
    assert len(two._hpopt_trials.trials) == 3
    assert two.suggest("3") == one.suggest("3")  # same history, same random state


def test_create_searcher_by_name():
    from tandem.tune.search import create_searcher
    from tandem.tune.search.hyperopt import HyperOptSearch

    s = create_searcher("HyperOpt", metric="a", mode="max", not_a_parameter=1)
    assert isinstance(s, HyperOptSearch) and s.metric == "a"
    with pytest.raises(ValueError, match="must be one of"):
        create_searcher("nope")
