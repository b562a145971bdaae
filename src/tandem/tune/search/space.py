"""Search-space primitives: ``Domain`` types and the factory functions users call.

The factories follow Ray Tune's names and bound conventions:

=====================================  ===============================================
``uniform(lower, upper)``              float in ``[lower, upper)``
``quniform(lower, upper, q)``          uniform, rounded to a multiple of ``q``
``loguniform(lower, upper, base=10)``  float, uniform in log space; ``0 < lower``
``qloguniform(lower, upper, q, ...)``  loguniform, rounded to a multiple of ``q``
``randint(lower, upper)``              int in ``[lower, upper)`` (upper *exclusive*)
``qrandint(lower, upper, q=1)``        int multiple of ``q`` in ``[lower, upper]`` (inclusive)
``lograndint(lower, upper, base=10)``  int in ``[lower, upper)``, log scale; ``0 < lower``
``randn(mean=0, sd=1)``                normal float
``qrandn(mean, sd, q)``                normal, rounded to a multiple of ``q``
``choice(categories)``                 one of the categories, uniformly
``grid_search(values)``                every value, in order (expands the grid)
``sample_from(func)``                  ``func(spec)`` with ``spec.config`` the resolved config
=====================================  ===============================================

Every domain samples with ``domain.sample(rng)`` where ``rng`` is a
``numpy.random.Generator``; samples are plain Python values (``float``, ``int`` or the
category object itself), so configs stay JSON-friendly.
"""

from __future__ import annotations

import inspect
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tandem._core.errors import ConfigError

__all__ = [
    "GRID_SEARCH_KEY",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "Normal",
    "choice",
    "grid_search",
    "is_grid_search",
    "lograndint",
    "loguniform",
    "qloguniform",
    "qrandint",
    "qrandn",
    "quniform",
    "randint",
    "randn",
    "sample_from",
    "uniform",
]

GRID_SEARCH_KEY = "grid_search"


def _default_rng(rng: np.random.Generator | None) -> np.random.Generator:
    return rng if rng is not None else np.random.default_rng()


def _check_number(fn: str, name: str, value: Any, *, integer: bool = False) -> None:
    kind = "an integer" if integer else "a finite number"
    ok_type = numbers.Integral if integer else numbers.Real
    if isinstance(value, bool) or not isinstance(value, ok_type):
        raise ConfigError(
            f"tune.{fn}(): {name}={value!r} ({type(value).__name__}) is not allowed; "
            f"{name} must be {kind}. Pass e.g. {name}={'1' if integer else '0.1'}."
        )
    if not integer and not math.isfinite(float(value)):
        raise ConfigError(
            f"tune.{fn}(): {name}={value!r} is not allowed; {name} must be finite. "
            "Use finite bounds; a search space cannot be unbounded."
        )


def _clean_float(value: float) -> float:
    # Rounding to a grid of q leaves artifacts such as 0.30000000000000004.
    return float(round(float(value), 12))


def _is_multiple(value: float, q: float) -> bool:
    ratio = value / q
    return math.isclose(ratio, round(ratio), rel_tol=1e-9, abs_tol=1e-9)


class Domain(ABC):
    """A set of values to sample one configuration value from.

    Subclasses implement :meth:`sample`; they are immutable after construction and
    validate their arguments in ``__init__`` (raising :class:`ConfigError`).
    """

    __slots__ = ()

    @abstractmethod
    def sample(self, rng: np.random.Generator | None = None) -> Any:
        """Draws one value using ``rng`` (a fresh unseeded generator when None)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and type(self) is type(other) and \
            self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def _key(self) -> tuple[Any, ...]:
        slots: tuple[str, ...] = self.__slots__
        return tuple(getattr(self, s) for s in slots)


class Float(Domain):
    """A float in ``[lower, upper)``, linear or log scale, optionally quantized to ``q``.

    Args:
        lower: Lower bound (inclusive).
        upper: Upper bound (exclusive; inclusive after quantization). Must exceed ``lower``.
        log: Sample uniformly in log space; needs ``lower > 0``.
        base: Logarithm base when ``log`` (only affects how the space is described).
        q: Round samples to a multiple of ``q``; both bounds must be multiples of ``q``.
    """

    __slots__ = ("_fn", "base", "log", "lower", "q", "upper")

    def __init__(
        self,
        lower: float,
        upper: float,
        *,
        log: bool = False,
        base: float = 10,
        q: float | None = None,
        _fn: str = "uniform",
    ) -> None:
        _check_number(_fn, "lower", lower)
        _check_number(_fn, "upper", upper)
        if not lower < upper:
            raise ConfigError(
                f"tune.{_fn}(lower={lower!r}, upper={upper!r}): lower must be less than upper. "
                f"Swap the bounds: tune.{_fn}({upper!r}, {lower!r}{', ...' if q else ''})."
                if lower > upper
                else f"tune.{_fn}(lower={lower!r}, upper={upper!r}): the range is empty; "
                "lower must be less than upper. For a fixed value, pass the constant itself."
            )
        if log:
            if lower <= 0:
                raise ConfigError(
                    f"tune.{_fn}(lower={lower!r}, upper={upper!r}): both bounds must be > 0 "
                    "because values are sampled on a log scale. Use a small positive lower "
                    f"bound such as 1e-6, or tune.uniform({lower!r}, {upper!r}) for a linear "
                    "scale."
                )
            _check_number(_fn, "base", base)
            if base <= 0 or base == 1:
                raise ConfigError(
                    f"tune.{_fn}(): base={base!r} is not allowed; the log base must be > 0 "
                    "and != 1. Leave it at its default of 10."
                )
        if q is not None:
            _check_number(_fn, "q", q)
            if q <= 0:
                raise ConfigError(
                    f"tune.{_fn}(): q={q!r} is not allowed; q must be > 0. "
                    "Pass the step to round samples to, e.g. q=0.1."
                )
            for name, bound in (("lower", lower), ("upper", upper)):
                if not _is_multiple(bound, q):
                    lo = math.ceil(lower / q) * q
                    hi = math.floor(upper / q) * q
                    raise ConfigError(
                        f"tune.{_fn}(lower={lower!r}, upper={upper!r}, q={q!r}): "
                        f"{name}={bound!r} is not a multiple of q, so rounded samples could "
                        f"leave the range. Use bounds that are multiples of q, e.g. "
                        f"lower={_clean_float(lo)!r}, upper={_clean_float(hi)!r}."
                    )
        self.lower = float(lower)
        self.upper = float(upper)
        self.log = bool(log)
        self.base = base
        self.q = q
        self._fn = _fn

    def sample(self, rng: np.random.Generator | None = None) -> float:
        rng = _default_rng(rng)
        if self.log:
            value = math.exp(rng.uniform(math.log(self.lower), math.log(self.upper)))
        else:
            value = rng.uniform(self.lower, self.upper)
        if self.q is not None:
            value = _clean_float(round(value / self.q) * self.q)
            value = min(max(value, self.lower), self.upper)
        return float(value)

    def __repr__(self) -> str:
        q = f", q={self.q!r}" if self.q is not None else ""
        base = f", base={self.base!r}" if self.log and self.base != 10 else ""
        return f"tune.{self._fn}({self.lower!r}, {self.upper!r}{q}{base})"


class Integer(Domain):
    """An integer in ``[low, high]`` (both inclusive), linear or log scale, or a multiple of ``q``.

    The factories translate Ray's bounds: ``randint(l, u)`` is ``Integer(l, u - 1)``,
    ``qrandint(l, u, q)`` is ``Integer(l, u, q=q)``.

    Args:
        low: Smallest value (inclusive).
        high: Largest value (inclusive).
        log: Sample on a log scale; needs ``low > 0``.
        base: Log base (descriptive only).
        q: Only multiples of ``q`` within ``[low, high]`` are sampled (uniformly).
    """

    __slots__ = ("_args", "_fn", "base", "high", "log", "low", "q")

    def __init__(
        self,
        low: int,
        high: int,
        *,
        log: bool = False,
        base: float = 10,
        q: int | None = None,
        _fn: str = "qrandint",
        _args: tuple[Any, ...] | None = None,
    ) -> None:
        self._fn = _fn
        self._args = _args if _args is not None else (low, high)
        self.low = int(low)
        self.high = int(high)
        self.log = bool(log)
        self.base = base
        self.q = q
        if self.low > self.high:
            raise ConfigError(f"{self!r}: the range is empty; lower must not exceed upper.")
        if log and self.low <= 0:
            raise ConfigError(f"{self!r}: lower must be > 0 because values are on a log scale.")
        if q is not None:
            lo = math.ceil(self.low / q) * q
            hi = math.floor(self.high / q) * q
            if lo > hi:
                raise ConfigError(
                    f"{self!r}: no multiple of q={q} lies between {self.low} and {self.high}. "
                    "Widen the range or use a smaller q."
                )

    def sample(self, rng: np.random.Generator | None = None) -> int:
        rng = _default_rng(rng)
        if self.q is not None:
            lo = math.ceil(self.low / self.q) * self.q
            hi = math.floor(self.high / self.q) * self.q
            return int(lo + self.q * int(rng.integers(0, (hi - lo) // self.q + 1)))
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high + 1)))
            return int(min(max(math.floor(value), self.low), self.high))
        return int(rng.integers(self.low, self.high + 1))

    def __repr__(self) -> str:
        return f"tune.{self._fn}({', '.join(repr(a) for a in self._args)})"


class Normal(Domain):
    """A normally distributed float, optionally rounded to a multiple of ``q``."""

    __slots__ = ("mean", "q", "sd")

    def __init__(self, mean: float = 0.0, sd: float = 1.0, q: float | None = None) -> None:
        fn = "qrandn" if q is not None else "randn"
        _check_number(fn, "mean", mean)
        _check_number(fn, "sd", sd)
        if sd <= 0:
            raise ConfigError(
                f"tune.{fn}(mean={mean!r}, sd={sd!r}): sd must be > 0. "
                "Pass a positive standard deviation, e.g. sd=1.0."
            )
        if q is not None:
            _check_number(fn, "q", q)
            if q <= 0:
                raise ConfigError(f"tune.qrandn(): q={q!r} is not allowed; q must be > 0.")
        self.mean = float(mean)
        self.sd = float(sd)
        self.q = q

    def sample(self, rng: np.random.Generator | None = None) -> float:
        value = float(_default_rng(rng).normal(self.mean, self.sd))
        if self.q is not None:
            value = _clean_float(round(value / self.q) * self.q)
        return value

    def __repr__(self) -> str:
        if self.q is None:
            return f"tune.randn({self.mean!r}, {self.sd!r})"
        return f"tune.qrandn({self.mean!r}, {self.sd!r}, {self.q!r})"


class Categorical(Domain):
    """One of ``categories``, chosen uniformly. Categories are returned as-is (not copied)."""

    __slots__ = ("categories",)

    def __init__(self, categories: Sequence[Any]) -> None:
        if isinstance(categories, (str, bytes, dict, set, frozenset)) or not isinstance(
            categories, Sequence
        ):
            raise ConfigError(
                f"tune.choice(categories={categories!r}): categories must be a list or tuple "
                f"of values, got {type(categories).__name__}. "
                "Write e.g. tune.choice([16, 32, 64])."
            )
        if len(categories) == 0:
            raise ConfigError(
                "tune.choice([]): categories is empty; give at least one value, "
                "e.g. tune.choice(['adam', 'sgd'])."
            )
        self.categories = list(categories)

    def sample(self, rng: np.random.Generator | None = None) -> Any:
        return self.categories[int(_default_rng(rng).integers(0, len(self.categories)))]

    def _key(self) -> tuple[Any, ...]:
        return (repr(self.categories),)

    def __repr__(self) -> str:
        return f"tune.choice({self.categories!r})"


class Function(Domain):
    """``sample_from(func)``: a value computed from the rest of the resolved config.

    ``func`` takes either no argument or one, ``spec``, where ``spec.config`` (also
    ``spec["config"]``) is the config with grid and random values already resolved, e.g.
    ``sample_from(lambda spec: spec.config.lr * 2)``.
    """

    __slots__ = ("func", "pass_spec")

    def __init__(self, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise ConfigError(
                f"tune.sample_from(func={func!r}): func must be callable, got "
                f"{type(func).__name__}. Write e.g. tune.sample_from(lambda spec: "
                "spec.config.lr * 2)."
            )
        self.func = func
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError):  # builtins without a signature: try with spec.
            self.pass_spec = True
            return
        try:
            sig.bind(None)
            self.pass_spec = True
        except TypeError:
            try:
                sig.bind()
            except TypeError:
                raise ConfigError(
                    f"tune.sample_from(func={func!r}): func must accept zero arguments or "
                    f"one (the spec), but its signature is {sig}. "
                    "Write e.g. tune.sample_from(lambda spec: spec.config.lr * 2)."
                ) from None
            self.pass_spec = False

    def sample(self, rng: np.random.Generator | None = None, spec: Any = None) -> Any:
        """Calls ``func(spec)`` (or ``func()``); ``rng`` is unused."""
        return self.func(spec) if self.pass_spec else self.func()

    def __repr__(self) -> str:
        return f"tune.sample_from({self.func!r})"


def is_grid_search(value: Any) -> bool:
    """True for ``{"grid_search": [...]}``, the (Ray-compatible) form of :func:`grid_search`."""
    return type(value) is dict and len(value) == 1 and GRID_SEARCH_KEY in value


# --------------------------------------------------------------------------- factories


def uniform(lower: float, upper: float) -> Float:
    """A float sampled uniformly from ``[lower, upper)``."""
    return Float(lower, upper, _fn="uniform")


def quniform(lower: float, upper: float, q: float) -> Float:
    """``uniform(lower, upper)`` rounded to a multiple of ``q`` (bounds must be multiples)."""
    return Float(lower, upper, q=q, _fn="quniform")


def loguniform(lower: float, upper: float, base: float = 10) -> Float:
    """A float sampled uniformly in log space between ``lower > 0`` and ``upper``."""
    return Float(lower, upper, log=True, base=base, _fn="loguniform")


def qloguniform(lower: float, upper: float, q: float, base: float = 10) -> Float:
    """``loguniform(lower, upper)`` rounded to a multiple of ``q``."""
    return Float(lower, upper, log=True, base=base, q=q, _fn="qloguniform")


def _int_args(fn: str, lower: Any, upper: Any) -> None:
    _check_number(fn, "lower", lower, integer=True)
    _check_number(fn, "upper", upper, integer=True)


def randint(lower: int, upper: int) -> Integer:
    """An integer in ``[lower, upper)``: ``upper`` is exclusive, as in Ray and NumPy."""
    _int_args("randint", lower, upper)
    if not lower < upper:
        raise ConfigError(
            f"tune.randint(lower={lower!r}, upper={upper!r}): lower must be less than upper "
            f"(upper is exclusive). For values {lower}..{upper} write "
            f"tune.randint({min(lower, upper)}, {max(lower, upper) + 1})."
        )
    return Integer(lower, upper - 1, _fn="randint", _args=(lower, upper))


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """An integer multiple of ``q`` in ``[lower, upper]``: ``upper`` is *inclusive*."""
    _int_args("qrandint", lower, upper)
    _check_number("qrandint", "q", q, integer=True)
    if q <= 0:
        raise ConfigError(
            f"tune.qrandint(): q={q!r} is not allowed; q must be a positive integer, e.g. q=1."
        )
    if not lower <= upper:
        raise ConfigError(
            f"tune.qrandint(lower={lower!r}, upper={upper!r}, q={q!r}): lower must not exceed "
            f"upper. Swap the bounds: tune.qrandint({upper!r}, {lower!r}, {q!r})."
        )
    return Integer(lower, upper, q=q, _fn="qrandint", _args=(lower, upper, q))


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """An integer in ``[lower, upper)`` sampled on a log scale; ``lower`` must be > 0."""
    _int_args("lograndint", lower, upper)
    if lower <= 0:
        raise ConfigError(
            f"tune.lograndint(lower={lower!r}, upper={upper!r}): lower must be > 0 because "
            "values are sampled on a log scale. Use lower=1, or tune.randint() for a linear "
            "scale."
        )
    if not lower < upper:
        raise ConfigError(
            f"tune.lograndint(lower={lower!r}, upper={upper!r}): lower must be less than upper "
            "(upper is exclusive)."
        )
    _check_number("lograndint", "base", base)
    if base <= 0 or base == 1:
        raise ConfigError(
            f"tune.lograndint(): base={base!r} is not allowed; the log base must be > 0 and "
            "!= 1. Leave it at its default of 10."
        )
    return Integer(lower, upper - 1, log=True, base=base, _fn="lograndint", _args=(lower, upper))


def randn(mean: float = 0.0, sd: float = 1.0) -> Normal:
    """A float from the normal distribution ``N(mean, sd**2)``."""
    return Normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Normal:
    """``randn(mean, sd)`` rounded to a multiple of ``q``."""
    return Normal(mean, sd, q)


def choice(categories: Sequence[Any]) -> Categorical:
    """One of ``categories``, sampled uniformly."""
    return Categorical(categories)


def grid_search(values: Sequence[Any]) -> dict[str, list[Any]]:
    """Evaluate every value in ``values``; several grids in one space form their product.

    Returns ``{"grid_search": [...]}``, the same marker Ray uses, so hand-written
    ``{"grid_search": [...]}`` dicts work too. ``TuneConfig.num_samples`` repeats the whole
    grid.
    """
    if isinstance(values, (str, bytes, dict, set, frozenset)) or not isinstance(values, Sequence):
        raise ConfigError(
            f"tune.grid_search(values={values!r}): values must be a list or tuple, got "
            f"{type(values).__name__}. Write e.g. tune.grid_search([0.01, 0.1])."
        )
    if len(values) == 0:
        raise ConfigError(
            "tune.grid_search([]): values is empty; give at least one value, "
            "e.g. tune.grid_search([1, 2])."
        )
    return {GRID_SEARCH_KEY: list(values)}


def sample_from(func: Callable[..., Any]) -> Function:
    """A value computed by ``func(spec)`` from the otherwise resolved config.

    Example: ``{"a": tune.uniform(0, 1), "b": tune.sample_from(lambda spec: spec.config.a * 2)}``.
    """
    return Function(func)


#: The factory functions, so the variant generator can tell ``tune.uniform`` passed
#: without being called (a mistake) from an ordinary callable constant.
FACTORIES: frozenset[Callable[..., Any]] = frozenset(
    {
        uniform,
        quniform,
        loguniform,
        qloguniform,
        randint,
        qrandint,
        lograndint,
        randn,
        qrandn,
        choice,
        grid_search,
        sample_from,
    }
)
