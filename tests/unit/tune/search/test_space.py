from __future__ import annotations

import numpy as np
import pytest

from tandem._core.errors import ConfigError, TandemError
from tandem.tune import search as tune


def _draw(domain, n=2000, seed=0):
    rng = np.random.default_rng(seed)
    return [domain.sample(rng) for _ in range(n)]


def test_uniform_bounds_and_type():
    xs = _draw(tune.uniform(-1, 2))
    assert all(isinstance(x, float) and -1 <= x < 2 for x in xs)


def test_quniform_multiples_of_q():
    xs = _draw(tune.quniform(0, 1, 0.25))
    assert set(xs) <= {0.0, 0.25, 0.5, 0.75, 1.0}
    assert len(set(xs)) == 5


def test_loguniform_spread_over_decades():
    xs = np.array(_draw(tune.loguniform(1e-4, 1e-1)))
    assert xs.min() >= 1e-4 and xs.max() < 1e-1
    # Uniform in log space: about a third of the mass in each decade.
    assert 0.25 < np.mean(xs < 1e-3) < 0.42


def test_qloguniform_stays_in_bounds():
    xs = _draw(tune.qloguniform(1e-4, 1e-1, 5e-5))
    assert all(1e-4 <= x <= 1e-1 for x in xs)
    assert all(abs(x / 5e-5 - round(x / 5e-5)) < 1e-6 for x in xs)


def test_randint_upper_exclusive():
    xs = _draw(tune.randint(0, 3))
    assert set(xs) == {0, 1, 2}
    assert all(type(x) is int for x in xs)


def test_qrandint_upper_inclusive():
    assert set(_draw(tune.qrandint(0, 10, 5))) == {0, 5, 10}
    assert set(_draw(tune.qrandint(-21, 12, 3))) == set(range(-21, 13, 3))
    assert set(_draw(tune.qrandint(1, 3))) == {1, 2}  # q=1: upper exclusive, as in Ray


def test_lograndint_upper_exclusive():
    xs = _draw(tune.lograndint(1, 100))
    assert min(xs) == 1 and max(xs) <= 99
    assert np.mean(np.array(xs) < 10) > 0.4  # log scale favours small values


def test_randn_and_qrandn():
    xs = np.array(_draw(tune.randn(5, 2), n=5000))
    assert abs(xs.mean() - 5) < 0.1 and abs(xs.std() - 2) < 0.1
    assert all(x * 2 == round(x * 2) for x in _draw(tune.qrandn(0, 1, 0.5)))


def test_choice_returns_the_objects():
    cats = [{"a": 1}, "sgd", None]
    xs = _draw(tune.choice(cats), n=300)
    assert any(x is cats[0] for x in xs) and "sgd" in xs and None in xs


def test_seeded_samples_reproduce():
    d = tune.loguniform(1e-5, 1)
    assert _draw(d, 10, seed=3) == _draw(d, 10, seed=3)
    assert _draw(d, 10, seed=3) != _draw(d, 10, seed=4)


def test_grid_search_is_ray_marker():
    assert tune.grid_search([1, 2]) == {"grid_search": [1, 2]}


@pytest.mark.parametrize(
    ("make", "needles"),
    [
        (lambda: tune.uniform(5, 1), ["lower=5", "upper=1", "Swap", "uniform(1, 5)"]),
        (lambda: tune.uniform(1, 1), ["empty"]),
        (lambda: tune.uniform("a", 1), ["lower='a'", "number"]),
        (lambda: tune.uniform(0, float("inf")), ["finite"]),
        (lambda: tune.loguniform(0, 1), ["lower=0", "> 0", "log scale", "uniform(0, 1)"]),
        (lambda: tune.loguniform(1e-3, 1, base=1), ["base=1"]),
        (lambda: tune.quniform(0, 1, 0.3), ["upper=1", "multiple of q"]),
        (lambda: tune.quniform(0, 1, -0.1), ["q=-0.1", "> 0"]),
        (lambda: tune.randint(3, 3), ["exclusive", "randint(3, 4)"]),
        (lambda: tune.randint(0.5, 3), ["lower=0.5", "integer"]),
        (lambda: tune.qrandint(5, 1), ["Swap"]),
        (lambda: tune.qrandint(1, 2, 5), ["no multiple of q=5"]),
        (lambda: tune.qrandint(0, 10, 0), ["q=0"]),
        (lambda: tune.lograndint(0, 10), ["lower must be > 0"]),
        (lambda: tune.randn(0, 0), ["sd=0", "> 0"]),
        (lambda: tune.choice([]), ["empty"]),
        (lambda: tune.choice("abc"), ["list or tuple", "str"]),
        (lambda: tune.choice({1, 2}), ["list or tuple"]),
        (lambda: tune.grid_search([]), ["empty"]),
        (lambda: tune.grid_search(3), ["list or tuple"]),
        (lambda: tune.sample_from(3), ["callable"]),
        (lambda: tune.sample_from(lambda a, b: 1), ["zero arguments or one"]),
    ],
)
def test_bad_arguments_raise_clear_errors(make, needles):
    with pytest.raises(ConfigError) as info:
        make()
    assert isinstance(info.value, (TandemError, ValueError))
    for needle in needles:
        assert needle in str(info.value), str(info.value)


def test_sample_from_zero_or_one_argument():
    assert tune.sample_from(lambda: 4).sample() == 4
    assert tune.sample_from(lambda spec: spec).sample(spec=7) == 7
