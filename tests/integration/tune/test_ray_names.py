"""Ray names that had no counterpart, on one real Tuner run: ``wrap_function`` /
``FunctionTrainable`` and ``SearchGenerator``; and the checks of bad input."""

from __future__ import annotations

import pytest

import tandem
from tandem import tune
from tandem._core.errors import ConfigError
from tandem.tune.search import BasicVariantGenerator, SearchAlgorithm, SearchGenerator
from tandem.tune.trainable import FunctionTrainable, wrap_function

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _objective(config):
    tune.report({"step": 1})
    return {"score": config["x"] * 2}  # the returned dict is the last result, as in Ray


def test_wrapped_function_runs_with_a_search_generator(storage):
    cls = wrap_function(_objective, name="objective")
    assert issubclass(cls, FunctionTrainable) and cls.__name__ == "objective"
    with pytest.raises(ConfigError, match="runs only as a trial"):
        cls({})
    searcher = BasicVariantGenerator(random_state=0)
    config = tune.TuneConfig(search_alg=SearchGenerator(searcher), num_samples=3)
    assert config.search_alg is searcher
    tandem.init(num_cpus=2)
    grid = tune.Tuner(cls, param_space={"x": tune.randint(0, 100)}, tune_config=config,
                      run_config=tune.RunConfig(storage_path=storage, verbose=0)).fit()
    assert grid.num_errors == 0 and len(grid) == 3
    assert all(r.metrics["score"] == 2 * r.config["x"] for r in grid)
    assert "objective" in grid[0].path.rsplit("/", 2)[-2]  # named after the wrapper's name


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="single 'config' positional parameter"):
        wrap_function(lambda a, b: None)

    class Own(SearchAlgorithm):
        pass

    with pytest.raises(ConfigError, match="subclass tandem.tune.search.Searcher"):
        tune.TuneConfig(search_alg=Own())
    with pytest.raises(ConfigError, match="must subclass"):
        SearchGenerator("optuna")
    from tandem.tune.search import ConcurrencyLimiter
    from tandem.tune.search.searcher import ConcurrencyLimiter as AtRaysPath

    assert AtRaysPath is ConcurrencyLimiter
