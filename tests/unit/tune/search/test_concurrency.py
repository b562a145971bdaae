from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.tune import search as tune
from tandem.tune.search import BasicVariantGenerator, ConcurrencyLimiter, Searcher


class _CountingSearcher(Searcher):
    def __init__(self):
        super().__init__(metric="loss", mode="min")
        self.asked = 0
        self.completed: list[tuple[str, bool]] = []

    def suggest(self, trial_id):
        self.asked += 1
        return {"i": self.asked}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, error))


def test_caps_in_flight_suggestions():
    inner = _CountingSearcher()
    limiter = ConcurrencyLimiter(inner, max_concurrent=2)
    assert limiter.metric == "loss" and limiter.mode == "min"
    assert limiter.suggest("a") == {"i": 1}
    assert limiter.suggest("b") == {"i": 2}
    assert limiter.suggest("c") is None and inner.asked == 2  # not even asked
    limiter.on_trial_result("a", {"loss": 1.0})
    limiter.on_trial_complete("a", {"loss": 1.0})
    assert limiter.num_live == 1
    assert limiter.suggest("c") == {"i": 3}
    assert limiter.suggest("d") is None
    limiter.on_trial_complete("b", error=True)
    limiter.on_trial_complete("b")  # unknown now: ignored, not forwarded twice
    assert inner.completed == [("a", False), ("b", True)]


def test_forwards_setup_and_finished():
    limiter = ConcurrencyLimiter(BasicVariantGenerator(random_state=0), max_concurrent=1)
    limiter.set_search_properties(None, None, {"a": tune.grid_search([1, 2])})
    assert limiter.set_num_samples(1) is True
    assert limiter.suggest("t0") == {"a": 1}
    assert limiter.suggest("t1") is None
    limiter.on_trial_complete("t0", {})
    assert limiter.suggest("t1") == {"a": 2}
    limiter.on_trial_complete("t1", {})
    assert limiter.suggest("t2") == Searcher.FINISHED


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_max_concurrent(bad):
    with pytest.raises(ConfigError, match="max_concurrent"):
        ConcurrencyLimiter(_CountingSearcher(), bad)


def test_rejects_non_searcher():
    with pytest.raises(ConfigError, match="must be a tandem Searcher"):
        ConcurrencyLimiter(object(), 2)  # type: ignore[arg-type]
