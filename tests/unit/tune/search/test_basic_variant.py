from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.tune import search as tune
from tandem.tune.search import BasicVariantGenerator, Searcher


def _setup(space, num_samples=1, **kw):
    gen = BasicVariantGenerator(**kw)
    assert gen.set_search_properties(None, None, space) is True
    assert gen.set_num_samples(num_samples) is True  # it ends the experiment itself
    return gen


def _drain(gen, prefix="t"):
    out = []
    while True:
        config = gen.suggest(f"{prefix}{len(out)}")
        if config == Searcher.FINISHED:
            return out
        assert config is not None
        out.append(config)


def test_finished_after_num_samples_times_grid():
    space = {"a": tune.grid_search([1, 2, 3]), "b": tune.uniform(0, 1)}
    gen = _setup(space, 4, random_state=0)
    assert gen.total_samples == 12
    assert len(_drain(gen)) == 12
    assert gen.suggest("again") == Searcher.FINISHED


def test_seed_reproduces():
    space = {"a": tune.loguniform(1e-4, 1), "b": tune.grid_search([1, 2])}
    assert _drain(_setup(space, 3, random_state=7)) == _drain(_setup(space, 3, random_state=7))


def test_max_concurrent_returns_none_until_a_trial_completes():
    gen = _setup({"a": tune.uniform(0, 1)}, 5, max_concurrent=2, random_state=0)
    assert isinstance(gen.suggest("t0"), dict) and isinstance(gen.suggest("t1"), dict)
    assert gen.suggest("t2") is None
    gen.on_trial_complete("t0", {"x": 1})
    assert isinstance(gen.suggest("t2"), dict)


def test_points_to_evaluate_first():
    gen = _setup(
        {"a": tune.uniform(0, 1), "b": 5}, 3, points_to_evaluate=[{"a": 0.5}], random_state=0
    )
    configs = _drain(gen)
    assert len(configs) == 3 and configs[0] == {"a": 0.5, "b": 5}
    assert gen.last_variant is not None


def test_save_restore_continues_the_stream(tmp_path):
    space = {
        "a": tune.uniform(0, 1),
        "b": tune.grid_search([1, 2]),
        "c": tune.sample_from(lambda s: s.config.a + 1),
    }
    full = _drain(_setup(space, 3, random_state=11))
    gen = _setup(space, 3, random_state=11)
    first = [gen.suggest(f"t{i}") for i in range(2)]
    gen.save(tmp_path / "searcher.pkl")
    restored = BasicVariantGenerator()
    restored.restore(tmp_path / "searcher.pkl")
    assert first + _drain(restored, prefix="r") == full


def test_bad_arguments():
    with pytest.raises(ConfigError, match="max_concurrent=-1"):
        BasicVariantGenerator(max_concurrent=-1)
    with pytest.raises(ConfigError, match="list of dicts"):
        BasicVariantGenerator(points_to_evaluate={"a": 1})
    with pytest.raises(ConfigError, match=r"'z' is not in the param space"):
        _setup({"a": tune.uniform(0, 1)}, points_to_evaluate=[{"z": 1}])
    with pytest.raises(ConfigError, match="num_samples=0"):
        _setup({"a": 1}, 0)
    with pytest.raises(ConfigError, match="mode='best'"):
        _setup({"a": 1}).set_search_properties("loss", "best", {})
