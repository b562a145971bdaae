"""Search spaces, as Ray's python/ray/tune/tests/test_sample.py checks them (public API only):
the bounds and types of every sampler, the domain builders, ``sample(size=...)``,
quantization, ``sample_from`` signatures and seeded reproducibility."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pytest

from tests.ray_suite.swap import target, tune

sample = target("tune.search.sample")
BasicVariantGenerator = target("tune.search").BasicVariantGenerator


def _space():
    return {
        "func": tune.sample_from(lambda config: config["uniform"] * 0.01),
        "uniform": tune.uniform(-5, -1),
        "quniform": tune.quniform(3.2, 5.4, 0.2),
        "loguniform": tune.loguniform(1e-4, 1e-2),
        "qloguniform": tune.qloguniform(1e-4, 1e-1, 5e-5),
        "choice": tune.choice([2, 3, 4]),
        "randint": tune.randint(-9, 15),
        "lograndint": tune.lograndint(1, 10),
        "qrandint": tune.qrandint(-21, 12, 3),
        "qrandint_q3": tune.qrandint(1, 10, 3),
        "qrandint_q1": tune.qrandint(1, 5, 1),
        "qlograndint": tune.qlograndint(2, 20, 2),
        "randn": tune.randn(10, 2),
        "qrandn": tune.qrandn(10, 2, 0.2),
    }


def _check_configs(configs, check_stats=True):
    stats = defaultdict(list)
    for out in configs:
        for k, v in out.items():
            stats[k].append(v)
        assert out["func"] == pytest.approx(out["uniform"] * 0.01)
        assert -5 <= out["uniform"] < -1
        assert 3.2 <= out["quniform"] <= 5.4
        assert out["quniform"] / 0.2 == pytest.approx(round(out["quniform"] / 0.2))
        assert 1e-4 <= out["loguniform"] < 1e-2
        assert 1e-4 <= out["qloguniform"] <= 1e-1
        assert out["qloguniform"] / 5e-5 == pytest.approx(round(out["qloguniform"] / 5e-5))
        assert out["choice"] in [2, 3, 4]
        assert -9 <= out["randint"] < 15 and isinstance(out["randint"], int)
        assert 1 <= out["lograndint"] < 10 and isinstance(out["lograndint"], int)
        assert -21 <= out["qrandint"] <= 12 and out["qrandint"] % 3 == 0
        assert isinstance(out["qrandint"], int)
        assert 1 <= out["qrandint_q3"] <= 10 and out["qrandint_q3"] % 3 == 0
        assert 1 <= out["qrandint_q1"] <= 5 and isinstance(out["qrandint_q1"], int)
        assert 2 <= out["qlograndint"] <= 20 and out["qlograndint"] % 2 == 0
        assert 0 < out["randn"] < 20
        assert 0 < out["qrandn"] < 20
        assert out["qrandn"] / 0.2 == pytest.approx(round(out["qrandn"] / 0.2))
    if check_stats:
        assert set(stats["choice"]) == {2, 3, 4}
        assert set(stats["randint"]) == set(range(-9, 15))
        assert set(stats["qrandint"]) == set(range(-21, 13, 3))
        assert set(stats["qrandint_q3"]) == {3, 6, 9}
        assert set(stats["qrandint_q1"]) >= set(range(1, 5))
        assert set(stats["lograndint"]) == set(range(1, 10))
        assert set(stats["qlograndint"]) == set(range(2, 21, 2))


def _sample_space(space, n, random_state=None):
    """Resolve a space ``n`` times with the domains' own ``sample`` (what a searcher does)."""
    rng = np.random.default_rng(random_state)
    out = []
    for _ in range(n):
        config = {}
        for key, domain in space.items():
            if key != "func":
                config[key] = domain.sample(random_state=rng)
        config["func"] = space["func"].sample(config)
        out.append(config)
    return out


def test_sample_bounds_random():
    _check_configs(_sample_space(_space(), 1000, random_state=0))


def test_sample_bounds_through_a_tuner():
    def objective(config):
        tune.report({"ok": 1})

    space = _space()
    results = tune.Tuner(objective, param_space=space,
                         tune_config=tune.TuneConfig(num_samples=20)).fit()
    _check_configs([r.config for r in results], check_stats=False)


def test_bounded_float():
    bounded = sample.Float(-4.2, 8.3)
    with pytest.raises(ValueError):  # one sampler only
        bounded.normal().uniform()
    samples = bounded.uniform().sample(size=1000)
    assert all(-4.2 <= s < 8.3 for s in samples)
    assert not np.mean(samples) < -2
    with pytest.raises(ValueError):
        bounded.loguniform().sample(size=1000)
    samples = sample.Float(1e-4, 1e-1).loguniform().sample(size=1000)
    assert all(1e-4 <= s < 1e-1 for s in samples)


def test_unbounded_float():
    with pytest.raises(ValueError):
        sample.Float(None, None).loguniform()
    samples = sample.Float(None, None).normal().sample(size=1000)
    assert any(-5 < s < 5 for s in samples)
    assert -1 < np.mean(samples) < 1


def test_bounded_int():
    samples = sample.Integer(-3, 12).uniform().sample(size=1000)
    assert all(-3 <= s < 12 for s in samples)
    assert set(samples) == set(range(-3, 12))


def test_categorical():
    categories = [-2, -1, 0, 1, 2]
    samples = sample.Categorical(categories).uniform().sample(size=1000)
    assert all(c in samples for c in categories)


def test_function():
    def draw(spec):
        return np.random.uniform(-4, 4)

    samples = sample.Function(draw).sample(size=1000)
    assert all(-4 <= s < 4 for s in samples)
    assert -2 < np.mean(samples) < 2


def test_function_signature():
    from functools import partial

    def sample_a():
        return 0

    def sample_b(spec):
        return 1

    def sample_c(spec, b="ok"):
        return 2

    def sample_d_invalid(spec, b):
        return 3

    for fn, expected in [(sample_a, 0), (sample_b, 1), (sample_c, 2),
                         (partial(sample_d_invalid, b="ok"), 3)]:
        assert tune.sample_from(fn).sample(None) == expected
    with pytest.raises(ValueError):
        tune.sample_from(sample_d_invalid).sample(None)


def test_quantized():
    with pytest.raises(ValueError):  # bounds not multiples of q
        sample.Float(1e-4, 1e-1).quantized(5e-4)
    with pytest.raises(ValueError):
        sample.Float(-1e-1, -1e-4).quantized(5e-4)
    samples = sample.Float(1e-4, 1e-1).loguniform().quantized(5e-5).sample(size=1000)
    for s in samples:
        assert s / 5e-5 == pytest.approx(round(s / 5e-5))
        assert 1e-4 <= s <= 1e-1
    ints = sample.Integer(0, 10).uniform().quantized(5).sample(size=300)
    assert set(ints) == {0, 5, 10}  # upper bound inclusive with q > 1
    assert sample.Integer(-1, 9).uniform().quantized(2).sample(size=1000)  # no error


def test_quantized_q1_upper_exclusive():
    assert set(tune.qrandint(1, 3, 1).sample(size=300)) == {1, 2}


def test_sample_size_returns_list_or_value():
    assert isinstance(tune.uniform(0, 1).sample(), float)
    assert len(tune.uniform(0, 1).sample(size=5)) == 5
    assert isinstance(tune.randint(0, 3).sample(), int)


def test_is_valid_and_domain_str():
    assert tune.uniform(0, 1).is_valid(0.5) and not tune.uniform(0, 1).is_valid(2)
    assert tune.randint(0, 3).is_valid(2)
    assert tune.choice(["a", "b"]).is_valid("a") and not tune.choice(["a"]).is_valid("c")
    assert tune.uniform(0, 1).domain_str == "(0, 1)"
    assert tune.sample_from(lambda: 1).is_function()
    assert not tune.uniform(0, 1).is_function()


def test_random_state_reproducible():
    for rs in (1000, None):
        if rs is None:
            np.random.seed(1000)
        a = tune.uniform(0, 1).sample(size=5, random_state=rs)
        if rs is None:
            np.random.seed(1000)
        b = tune.uniform(0, 1).sample(size=5, random_state=rs)
        assert list(a) == list(b)
    a = tune.randint(0, 1000).sample(size=5, random_state=np.random.default_rng(3))
    b = tune.randint(0, 1000).sample(size=5, random_state=np.random.default_rng(3))
    assert list(a) == list(b)


def _objective(config):
    tune.report({"uniform": config["uniform"]})


@pytest.mark.slow
def test_reproducibility_basic_variant_generator():
    space = _space()
    space.pop("func")
    params = {"config": space, "metric": "uniform", "mode": "max", "num_samples": 3}
    np.random.seed(1000)
    a = tune.run(_objective, search_alg=BasicVariantGenerator(max_concurrent=1), **params)
    np.random.seed(1000)
    b = tune.run(_objective, search_alg=BasicVariantGenerator(max_concurrent=1), **params)
    c = tune.run(_objective, search_alg=BasicVariantGenerator(max_concurrent=1,
                                                              random_state=7), **params)
    d = tune.run(_objective, search_alg=BasicVariantGenerator(max_concurrent=1,
                                                              random_state=7), **params)
    configs = [[t.config for t in x.trials] for x in (a, b, c, d)]
    assert configs[0] == configs[1]
    assert configs[2] == configs[3]
    assert configs[0] != configs[2]


def test_constant_grid_search():
    def objective(config):
        tune.report({"x": config["x"]})

    space = {"x": tune.uniform(0, 1), "g": tune.grid_search([1, 2, 3])}
    results = tune.Tuner(objective, param_space=space, tune_config=tune.TuneConfig(
        search_alg=BasicVariantGenerator(constant_grid_search=True))).fit()
    assert len({r.config["x"] for r in results}) == 1
    results = tune.Tuner(objective, param_space=space, tune_config=tune.TuneConfig(
        search_alg=BasicVariantGenerator(constant_grid_search=False))).fit()
    assert len({r.config["x"] for r in results}) == 3


def test_grid_search_and_nested_sample_from():
    def objective(config):
        tune.report({"b": config["nested"]["b"]})

    space = {"a": tune.grid_search([1, 2]),
             "nested": {"b": tune.sample_from(lambda config: config["a"] * 10)}}
    results = tune.Tuner(objective, param_space=space).fit()
    assert sorted(r.metrics["b"] for r in results) == [10, 20]


def test_sampler_objects():
    """Ray's samplers (``ray.tune.search.sample``): each domain's ``get_sampler()`` is a
    ``Uniform``/``LogUniform``/``Normal``/``BaseSampler``, wrapped in ``Quantized`` by
    ``.quantized(q)``; builders return configured copies; one sampler per domain."""
    base = sample.Float(0, 1)
    assert base.sampler is None and isinstance(base.get_sampler(), sample.Uniform)
    built = base.uniform().quantized(0.1)
    assert base.sampler is None  # the builders copy
    outer = built.get_sampler()
    assert isinstance(outer, sample.Quantized) and outer.q == 0.1
    assert isinstance(outer.get_sampler(), sample.Uniform)
    values = built.sample(size=50, random_state=0)
    assert all(0 <= v <= 1 and v / 0.1 == pytest.approx(round(v / 0.1)) for v in values)
    assert isinstance(tune.uniform(0, 1).get_sampler(), sample.Uniform)
    assert str(tune.uniform(0, 1).get_sampler()) == "Uniform"
    assert isinstance(tune.loguniform(1e-3, 1).get_sampler(), sample.LogUniform)
    q = tune.qloguniform(1e-3, 1, 1e-3).get_sampler()
    assert isinstance(q, sample.Quantized) and isinstance(q.sampler, sample.LogUniform)
    normal = tune.randn(1.0, 2.0)
    assert isinstance(normal, sample.Float)
    assert isinstance(normal.get_sampler(), sample.Normal)
    assert (normal.get_sampler().mean, normal.get_sampler().sd) == (1.0, 2.0)
    qn = tune.qrandn(0, 1, 0.5).get_sampler()
    assert isinstance(qn, sample.Quantized) and isinstance(qn.get_sampler(), sample.Normal)
    assert isinstance(sample.Float(None, None).normal(0, 1).get_sampler(), sample.Normal)
    qi = tune.qlograndint(2, 20, 2)
    assert isinstance(qi, sample.Integer) and isinstance(qi.get_sampler(), sample.Quantized)
    assert isinstance(qi.get_sampler().get_sampler(), sample.LogUniform)
    assert isinstance(tune.randint(0, 3).get_sampler(), sample.Uniform)
    assert isinstance(tune.choice([1, 2]), sample.Categorical)
    assert isinstance(tune.choice([1, 2]).get_sampler(), sample.Uniform)
    assert isinstance(tune.sample_from(lambda: 1).get_sampler(), sample.BaseSampler)
    for cls in (sample.Uniform, sample.LogUniform, sample.Normal, sample.Grid,
                sample.Quantized, sample.BaseSampler):
        assert issubclass(cls, sample.Sampler)
    assert not tune.uniform(0, 1).is_grid()


def test_set_sampler_one_per_domain():
    d = sample.Float(0, 1)
    d.set_sampler(sample.Uniform())  # in place, as Ray's does
    assert isinstance(d.sampler, sample.Uniform)
    with pytest.raises(ValueError, match="only choose one sampler"):
        d.set_sampler(sample.LogUniform())
    with pytest.raises(ValueError):
        sample.Integer(1, 10).loguniform().uniform()
    replaced = sample.Quantized(sample.Uniform(), 0.5)
    d.set_sampler(replaced, allow_override=True)
    assert d.get_sampler() is replaced
