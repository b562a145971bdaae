"""The library searchers and schedulers on a real Tuner (trials are real jobs).

Each searcher runs under a ConcurrencyLimiter; HyperOpt's state survives an interrupted
experiment and Tuner.restore; OptunaSearch searches two objectives at once; BOHB with
HyperBandForBOHB, PB2 and synchronous PBT make their decisions on real trials.
"""

from __future__ import annotations

import json
import os
import tempfile

import cloudpickle
import pytest

from tandem import tune
from tandem.train import Checkpoint
from tandem.tune.search import ConcurrencyLimiter
from tandem.tune.stopper import Stopper

pytestmark = pytest.mark.timeout(300)


def quadratic(config):
    tune.report({"loss": (config["x"] - 1) ** 2 + (config["y"] + 2) ** 2})


SPACE = {"x": tune.uniform(-5, 5), "y": tune.uniform(-5, 5)}


def _searcher(name):
    if name == "hyperopt":
        from tandem.tune.search.hyperopt import HyperOptSearch

        return HyperOptSearch(random_state_seed=0, n_initial_points=3)
    if name == "nevergrad":
        import nevergrad as ng

        from tandem.tune.search.nevergrad import NevergradSearch

        return NevergradSearch(optimizer=ng.optimizers.OnePlusOne)
    if name == "zoopt":
        from tandem.tune.search.zoopt import ZOOptSearch

        return ZOOptSearch(budget=6)
    if name == "bayesopt":
        from tandem.tune.search.bayesopt import BayesOptSearch

        return BayesOptSearch(random_state=0, random_search_steps=4)
    if name == "optuna":
        from tandem.tune.search import OptunaSearch

        return OptunaSearch(seed=0)
    raise AssertionError(name)


@pytest.mark.parametrize("name", [
    "hyperopt",
    pytest.param("nevergrad", marks=pytest.mark.slow),
    pytest.param("zoopt", marks=pytest.mark.slow),
    pytest.param("bayesopt", marks=pytest.mark.slow),
    pytest.param("optuna", marks=pytest.mark.slow),
])
def test_searcher_under_a_concurrency_limiter_on_a_tuner(name, storage):
    searcher = ConcurrencyLimiter(_searcher(name), max_concurrent=2)
    grid = tune.Tuner(
        quadratic,
        param_space={**SPACE, "tag": name},
        tune_config=tune.TuneConfig(search_alg=searcher, metric="loss", mode="min",
                                    num_samples=6),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert len(grid) == 6 and grid.num_errors == 0
    assert all(r.config["tag"] == name for r in grid)
    assert searcher.num_live == 0  # every trial's completion reached the searcher
    best = grid.get_best_result()
    assert best.metrics["loss"] == min(r.metrics["loss"] for r in grid)


class _StopAfter(Stopper):
    """Ends the experiment (as an interruption would) once ``n`` trials reported; only
    once per test process (the restored experiment gets this stopper back)."""

    fired = False

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, 0

    def __call__(self, trial_id, result):
        self.seen += 1
        return False

    def stop_all(self):
        if not _StopAfter.fired and self.seen >= self.n:
            _StopAfter.fired = True
            return True
        return False


def test_searcher_state_survives_tuner_restore(storage):
    from tandem.tune.controller import SEARCHER_FILE, load_searcher
    from tandem.tune.search.hyperopt import HyperOptSearch

    searcher = ConcurrencyLimiter(HyperOptSearch(random_state_seed=0), max_concurrent=1)
    tune.Tuner(
        quadratic, param_space=SPACE,
        tune_config=tune.TuneConfig(search_alg=searcher, metric="loss", mode="min",
                                    num_samples=7),
        run_config=tune.RunConfig(storage_path=storage, name="exp", verbose=0,
                                  stop=_StopAfter(3)),
    ).fit()
    path = os.path.join(storage, "exp")
    assert len(searcher.searcher._hpopt_trials.trials) == 3  # type: ignore[attr-defined]
    grid = tune.Tuner.restore(path, quadratic).fit()
    assert len(grid) == 7
    with open(os.path.join(path, SEARCHER_FILE), "rb") as f:
        restored = load_searcher(f.read())
    # the restored HyperOpt continued from the 3 trials it had seen: it knows all 7
    trials = restored.searcher._hpopt_trials.trials  # type: ignore[attr-defined]
    assert len(trials) == 7
    assert all(t["result"].get("loss") is not None for t in trials)


def test_multi_objective_optuna_gives_a_pareto_front(storage):
    from tandem.tune.search import OptunaSearch

    def two_goals(config):
        x, y = config["x"], config["y"]
        tune.report({"a": x**2 + y**2, "b": (x - 2) ** 2 + (y - 2) ** 2})

    searcher = OptunaSearch(metric=["a", "b"], mode=["min", "min"], seed=0)
    grid = tune.Tuner(
        two_goals,
        param_space={"x": tune.uniform(-1, 3), "y": tune.uniform(-1, 3)},
        tune_config=tune.TuneConfig(search_alg=searcher, num_samples=10),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert len(grid) == 10 and grid.num_errors == 0
    best_a = grid.get_best_result("a", "min")
    best_b = grid.get_best_result("b", "min")
    assert best_a.metrics["a"] == min(r.metrics["a"] for r in grid)
    assert best_b.metrics["b"] == min(r.metrics["b"] for r in grid)
    front = searcher.study.best_trials
    assert front and len(front) <= 10
    # Pareto: no trial of the front is dominated by any trial
    values = [t.values for t in searcher.study.trials]
    for t in front:
        assert not any(v[0] < t.values[0] and v[1] < t.values[1] for v in values)
    with pytest.raises(Exception, match="same length"):
        OptunaSearch(metric=["a", "b"], mode="min")


@pytest.mark.slow
def test_bohb_with_hyperband_for_bohb(storage):
    from tandem.tune.schedulers import HyperBandForBOHB
    from tandem.tune.search.bohb import TuneBOHB

    def steps(config):
        for i in range(9):
            tune.report({"loss": (config["x"] - 1) ** 2 + 1.0 / (i + 1)})

    searcher = TuneBOHB(seed=0, max_concurrent=2)
    scheduler = HyperBandForBOHB(max_t=9, reduction_factor=3)
    grid = tune.Tuner(
        steps, param_space={"x": tune.uniform(-5, 5)},
        tune_config=tune.TuneConfig(search_alg=searcher, scheduler=scheduler, metric="loss",
                                    mode="min", num_samples=9),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    iters = sorted(r.metrics["training_iteration"] for r in grid)
    assert set(iters) <= {1, 3, 9} and iters[-1] == 9 and iters[0] < 9  # halved at milestones
    # the trials that went furthest are the best ones at the first milestone
    assert searcher.bohber.configs  # BOHB learned budgets from HyperBand's results


def _counter(config):
    """Adds lr per step; checkpoints every step so PBT can clone it."""
    step, score = 0, 0.0
    ckpt = tune.get_checkpoint()
    if ckpt:
        with ckpt.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            state = json.load(f)
        step, score = state["step"], state["score"]
    while step < 8:
        step += 1
        score += config["lr"]
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"step": step, "score": score}, f)
            tune.report({"score": score, "lr": config["lr"]},
                        checkpoint=Checkpoint.from_directory(d))


@pytest.mark.slow
def test_synchronous_pbt_perturbs_the_population_together(storage):
    from tandem.tune.schedulers import PopulationBasedTraining

    pbt = PopulationBasedTraining(
        time_attr="training_iteration", metric="score", mode="max", perturbation_interval=2,
        hyperparam_mutations={"lr": tune.uniform(0.0, 1.0)}, synch=True, seed=0)
    grid = tune.Tuner(
        _counter, param_space={"lr": tune.grid_search([0.1, 0.2, 0.5, 0.9])},
        tune_config=tune.TuneConfig(scheduler=pbt),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0 and len(grid) == 4
    times = [p["time"] for p in pbt.perturbations]
    assert times == sorted(times) and set(times) == {2, 4, 6, 8}
    # one perturbation round per synchronization point (bottom quarter of 4 = 1 trial),
    # always cloning the best trial's checkpoint
    assert len(times) == 4
    assert all(p["donor_score"] >= p["score"] for p in pbt.perturbations)
    # the clones continued from the donor's checkpoint: every trial ends with more than
    # its static lr could have given it
    assert min(r.metrics["score"] for r in grid) > 8 * 0.1


@pytest.mark.slow
def test_pb2_explores_within_the_bounds(storage):
    from tandem.tune.schedulers import PB2

    pb2 = PB2(time_attr="training_iteration", metric="score", mode="max",
              perturbation_interval=2, hyperparam_bounds={"lr": [0.0, 1.0]})
    grid = tune.Tuner(
        _counter, param_space={"lr": tune.grid_search([0.1, 0.2, 0.5, 0.9])},
        tune_config=tune.TuneConfig(scheduler=pb2),
        run_config=tune.RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    assert pb2.perturbations, "PB2 never exploited"
    for p in pb2.perturbations:
        assert 0.0 <= p["new_config"]["lr"] <= 1.0
        assert p["donor_score"] >= p["score"]
    assert len(pb2.data) >= 8  # PB2's GP data: a row per trial per perturbation point
    cloudpickle.dumps(pb2)  # saved with the experiment
