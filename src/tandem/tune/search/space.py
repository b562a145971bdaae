"""Search-space primitives: ``Domain`` types and the factory functions users call.

The factories follow Ray Tune's names and bound conventions:

=====================================  ===============================================
``uniform(lower, upper)``              float in ``[lower, upper)``
``quniform(lower, upper, q)``          uniform, rounded to a multiple of ``q``
``loguniform(lower, upper, base=10)``  float, uniform in log space; ``0 < lower``
``qloguniform(lower, upper, q, ...)``  loguniform, rounded to a multiple of ``q``
``randint(lower, upper)``              int in ``[lower, upper)`` (upper *exclusive*)
``qrandint(lower, upper, q=1)``        int multiple of ``q`` in ``[lower, upper]`` (inclusive,
                                       except for ``q=1``: ``[lower, upper)``, as in Ray)
``lograndint(lower, upper, base=10)``  int in ``[lower, upper)``, log scale; ``0 < lower``
``qlograndint(lower, upper, q)``       int multiple of ``q`` in ``[lower, upper]``, log scale
``randn(mean=0, sd=1)``                normal float
``qrandn(mean, sd, q)``                normal, rounded to a multiple of ``q``
``choice(categories)``                 one of the categories, uniformly
``grid_search(values)``                every value, in order (expands the grid)
``sample_from(func)``                  ``func(spec)`` with ``spec.config`` the resolved config
=====================================  ===============================================

Every domain samples with ``domain.sample(config=None, size=1, random_state=None)`` (Ray's
signature; ``domain.sample(rng)`` with a ``numpy.random.Generator`` works too). Without a
``random_state`` the draw comes from NumPy's global generator, so ``np.random.seed(...)``
makes it reproducible, as in Ray. Samples are plain Python values (``float``, ``int`` or the
category object itself), so configs stay JSON-friendly; ``size > 1`` gives a list.

The domain classes also have Ray's builder methods (``Float(lower, upper).uniform()``,
``.loguniform()``, ``.normal(mean, sd)``, ``.quantized(q)``, ``Integer(...).uniform()``,
``Categorical(...).uniform()``), ``is_valid(value)``, ``domain_str``, ``cast(value)``,
``is_grid()`` and ``is_function()``, and Ray's sampler objects: ``domain.get_sampler()`` is a
``Uniform``, ``LogUniform``, ``Normal`` or ``BaseSampler``, inside ``Quantized`` after
``.quantized(q)``; ``set_sampler(sampler, allow_override=False)`` sets one.
"""

from __future__ import annotations

import inspect
import math
import numbers
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Self, SupportsIndex, TypeAlias

from tandem._core.errors import ConfigError

if TYPE_CHECKING:  # NumPy is imported where a value is drawn: a space of constants needs none
    import numpy as np

__all__ = [
    "GRID_SEARCH_KEY",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "BaseSampler",
    "Grid",
    "LogUniform",
    "Normal",
    "Quantized",
    "Sampler",
    "Uniform",
    "choice",
    "grid_search",
    "is_grid_search",
    "lograndint",
    "loguniform",
    "qlograndint",
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


RandomState: TypeAlias = "int | np.integer | np.random.Generator | np.random.RandomState | None"
"""What ``sample(random_state=...)`` takes: a seed, a NumPy generator, or None."""


def _default_rng(rng: RandomState | _LegacyRng) -> np.random.Generator | _LegacyRng:
    """A generator to draw from: ``rng`` itself, a new one for an int seed, or (None) NumPy's
    global generator, so that ``np.random.seed(...)`` fixes the draws (Ray's behaviour)."""
    if rng is None:
        return _GlobalRng()
    import numpy as np

    if isinstance(rng, np.random.RandomState):
        return _LegacyRng(rng)
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        return np.random.default_rng(int(rng))
    if isinstance(rng, bool):
        raise ConfigError(
            f"sample(random_state={rng!r}): a bool is not a seed; pass an int seed, a "
            "numpy.random.Generator, a numpy.random.RandomState or None.")
    return rng


class _LegacyRng:
    """``Generator``'s method names over a ``numpy.random.RandomState``."""

    def __init__(self, state: np.random.RandomState) -> None:
        self._state = state

    def uniform(self, low: float, high: float) -> float:
        return float(self._state.uniform(low, high))

    def normal(self, mean: float, sd: float) -> float:
        return float(self._state.normal(mean, sd))

    def integers(self, low: int, high: int) -> int:
        return int(self._state.randint(low, high))

    def random(self) -> float:
        return float(self._state.random_sample())


class _GlobalRng(_LegacyRng):
    def __init__(self) -> None:
        import numpy as np

        super().__init__(np.random.mtrand._rand)


def _split_sample_args(config: object, random_state: RandomState | _LegacyRng
                       ) -> tuple[object, RandomState | _LegacyRng]:
    """``sample(rng)`` (tandem's older spelling) and ``sample(config, size, random_state)``."""
    if random_state is None and config is not None and not isinstance(config, (dict, int)):
        import numpy as np

        if isinstance(config, (np.random.Generator, np.random.RandomState, _LegacyRng)):
            return None, config
    return config, random_state


def _check_number(fn: str, name: str, value: object, *, integer: bool = False) -> None:
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


# --------------------------------------------------------------------------- samplers


class Sampler:
    """How a domain draws its values (Ray's ``ray.tune.search.sample.Sampler``).

    A domain's sampler is :meth:`Domain.get_sampler`; the builders (``.uniform()``,
    ``.loguniform()``, ``.normal()``, ``.quantized(q)``) set it. ``sampler.sample(domain,
    config=None, size=1, random_state=None)`` draws from ``domain`` with this sampler.
    """

    def sample(self, domain: Domain, config: object = None, size: int = 1,
               random_state: RandomState = None) -> Any:
        if domain.sampler is self:
            return domain.sample(config, size, random_state)
        other = domain._copy()
        other.set_sampler(self, allow_override=True)
        return other.sample(config, size, random_state)

    def _key(self) -> tuple[object, ...]:
        return tuple(sorted(vars(self).items(), key=lambda kv: kv[0]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sampler) and type(self) is type(other) and \
            self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), repr(self._key())))

    def __repr__(self) -> str:
        return str(self)


class BaseSampler(Sampler):
    """The sampler of ``sample_from`` domains: it calls the function."""

    def __str__(self) -> str:
        return "Base"


class Uniform(Sampler):
    def __str__(self) -> str:
        return "Uniform"


class LogUniform(Sampler):
    """Uniform in log space. ``base`` only describes the space (Ray deprecates it)."""

    def __init__(self, base: float = 10) -> None:
        self.base = base

    def __str__(self) -> str:
        return "LogUniform"


class Normal(Sampler):
    """The normal distribution ``N(mean, sd**2)``; ``sd`` must be > 0 (Ray's default of 0
    is kept, so ``Normal()`` alone is refused as in Ray)."""

    def __init__(self, mean: float = 0.0, sd: float = 0.0) -> None:
        self.mean = mean
        self.sd = sd
        if not sd > 0:
            raise ConfigError(
                f"Normal(mean={mean!r}, sd={sd!r}): SD has to be strictly greater than 0. "
                "Pass a positive standard deviation, e.g. Normal(0.0, 1.0).")

    def __str__(self) -> str:
        return "Normal"


class Grid(Sampler):
    """Marks a grid search; a grid is expanded, never sampled."""

    def sample(self, domain: Domain, config: object = None, size: int = 1,
               random_state: RandomState = None) -> Any:
        raise RuntimeError("Do not call `sample()` on grid.")

    def __str__(self) -> str:
        return "Grid"


class Quantized(Sampler):
    """``sampler``'s values rounded to a multiple of ``q``."""

    def __init__(self, sampler: Sampler, q: float) -> None:
        if not isinstance(sampler, Sampler):
            raise ConfigError(
                f"Quantized(sampler={sampler!r}, q={q!r}): Quantized() expects a sampler "
                "instance, e.g. Quantized(Uniform(), 0.1).")
        self.sampler = sampler
        self.q = q

    def get_sampler(self) -> Sampler:
        return self.sampler

    def __str__(self) -> str:
        return f"Quantized({self.sampler}, q={self.q})"


def _unwrap(sampler: Sampler | None) -> tuple[Sampler | None, float | None]:
    """(the inner sampler, q or None)."""
    if isinstance(sampler, Quantized):
        return sampler.sampler, sampler.q
    return sampler, None


class Domain(ABC):
    """A set of values to sample one configuration value from.

    Subclasses implement :meth:`sample`; they are immutable after construction and
    validate their arguments in ``__init__`` (raising :class:`ConfigError`).
    """

    __slots__ = ()

    def sample(self, config: object = None, size: int = 1, random_state: RandomState = None
               ) -> Any:
        """Draws ``size`` values (one value when ``size == 1``, else a list), using
        ``random_state`` (a seed, a NumPy ``Generator`` or ``RandomState``; None: NumPy's
        global generator). ``config`` is the resolved config (for ``sample_from``)."""
        config, state = _split_sample_args(config, random_state)
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ConfigError(f"{self!r}.sample(size={size!r}): size must be an int >= 1.")
        rng = _default_rng(state)
        items = [self._sample_one(rng, config) for _ in range(size)]
        return items if size > 1 else items[0]

    @abstractmethod
    def _sample_one(self, rng: np.random.Generator | _LegacyRng, config: object) -> object:
        """Draws one value with ``rng``."""

    def cast(self, value: object) -> Any:
        """``value`` as this domain's type (Ray's ``Domain.cast``)."""
        return value

    def is_grid(self) -> bool:
        return isinstance(self.sampler, Grid)

    def is_function(self) -> bool:
        return False

    def is_valid(self, value: Any) -> bool:
        """Whether ``value`` lies in this domain."""
        raise NotImplementedError

    @property
    def domain_str(self) -> str:
        return "(unknown)"

    #: The sampler set by a builder (``.uniform()``, ...); None until one is set.
    sampler: Sampler | None = None
    #: What :meth:`get_sampler` returns while no sampler is set.
    default_sampler_cls: type[Sampler] = Uniform

    def get_sampler(self) -> Sampler:
        """The domain's sampler, or a new ``default_sampler_cls()`` when none is set."""
        return self.sampler if self.sampler is not None else self.default_sampler_cls()

    def set_sampler(self, sampler: Sampler, allow_override: bool = False) -> None:
        """Sets the sampler (in place, as Ray's does); a second one needs
        ``allow_override=True``."""
        if self.sampler is not None and not allow_override:
            raise ConfigError(
                "You can only choose one sampler for parameter domains. Existing sampler for "
                f"parameter {type(self).__name__}: {self.sampler}. Tried to add {sampler}")
        if not isinstance(sampler, Sampler):
            raise ConfigError(
                f"{type(self).__name__}.set_sampler({sampler!r}): not a sampler; pass one of "
                "Uniform(), LogUniform(), Normal(mean, sd) or Quantized(sampler, q).")
        self._apply_sampler(sampler)

    def _apply_sampler(self, sampler: Sampler) -> None:
        object.__setattr__(self, "sampler", sampler)

    def _copy(self) -> Self:
        new = object.__new__(type(self))
        for cls in type(self).__mro__:
            for slot in getattr(cls, "__slots__", ()):
                if hasattr(self, slot):
                    object.__setattr__(new, slot, getattr(self, slot))
        return new

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Domain) and type(self) is type(other) and \
            self._key() == other._key()

    def __hash__(self) -> int:
        return hash((type(self), self._key()))

    def _key(self) -> tuple[object, ...]:
        slots: tuple[str, ...] = self.__slots__
        return tuple(getattr(self, s) for s in slots)


_INF = float("inf")


class Float(Domain):
    """A float: ``Float(lower, upper)`` with a sampler (Ray's domain and builders).

    ``Float(lower, upper)`` alone has no sampler (it draws uniformly); ``.uniform()``,
    ``.loguniform()``, ``.normal(mean, sd)`` and ``.quantized(q)`` return configured copies
    (one sampler each; ``quantized`` wraps the others). ``Float(None, None)`` is unbounded,
    for ``.normal()`` (``tune.randn``). The sampler is :meth:`get_sampler`; :attr:`log`,
    :attr:`q`, :attr:`mean` and :attr:`sd` read it.

    Args:
        lower: Lower bound (inclusive); None for unbounded.
        upper: Upper bound (exclusive; inclusive after quantization). Must exceed ``lower``.
        log: Sample uniformly in log space; needs ``lower > 0``.
        base: Logarithm base when ``log`` (only affects how the space is described).
        q: Round samples to a multiple of ``q``; both bounds must be multiples of ``q``.
    """

    __slots__ = ("_fn", "_given", "base", "log", "lower", "mean", "q", "sampler", "sd",
                 "upper")

    def __init__(
        self,
        lower: float | None,
        upper: float | None,
        *,
        log: bool = False,
        base: float = 10,
        q: float | None = None,
        _fn: str = "Float",
    ) -> None:
        self.sampler = None
        self.log, self.base = False, base
        self.q: float | None = None
        self.mean: float | None = None
        self.sd: float | None = None
        self._fn = "Float"
        self._given = (lower, upper)
        if lower is None or upper is None:  # Ray's Float(None, None).normal()
            self.lower = -_INF if lower is None else float(lower)
            self.upper = _INF if upper is None else float(upper)
            return
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
            self._check_log(lower, upper, _fn)
            _check_number(_fn, "base", base)
            if base <= 0 or base == 1:
                raise ConfigError(
                    f"tune.{_fn}(): base={base!r} is not allowed; the log base must be > 0 "
                    "and != 1. Leave it at its default of 10."
                )
        if q is not None:
            self._check_q(lower, upper, q, _fn)
        self.lower = float(lower)
        self.upper = float(upper)
        if _fn != "Float":  # a factory: tune.uniform(...) etc. come with their sampler
            sampler: Sampler = LogUniform(base) if log else Uniform()
            self._apply_sampler(Quantized(sampler, q) if q is not None else sampler)
        self._fn = _fn

    @staticmethod
    def _check_log(lower: float, upper: float, fn: str) -> None:
        if lower <= 0 or not 0 < upper < _INF:
            raise ConfigError(
                f"tune.{fn}(lower={lower!r}, upper={upper!r}): both bounds must be > 0 "
                "because values are sampled on a log scale (LogUniform requires a lower bound "
                "greater than 0). Use a small positive lower bound such as 1e-6, or "
                f"tune.uniform({lower!r}, {upper!r}) for a linear scale."
            )

    @staticmethod
    def _check_q(lower: float, upper: float, q: float, fn: str) -> None:
        _check_number(fn, "q", q)
        if q <= 0:
            raise ConfigError(
                f"tune.{fn}(): q={q!r} is not allowed; q must be > 0. "
                "Pass the step to round samples to, e.g. q=0.1."
            )
        for name, bound in (("lower", lower), ("upper", upper)):
            if math.isfinite(bound) and not _is_multiple(bound, q):
                lo = math.ceil(lower / q) * q
                hi = math.floor(upper / q) * q
                raise ConfigError(
                    f"tune.{fn}(lower={lower!r}, upper={upper!r}, q={q!r}): "
                    f"{name}={bound!r} is not a multiple of q (not divisible by the "
                    f"quantization factor), so rounded samples could leave the range. Use "
                    f"bounds that are multiples of q, e.g. lower={_clean_float(lo)!r}, "
                    f"upper={_clean_float(hi)!r}."
                )

    def _apply_sampler(self, sampler: Sampler) -> None:
        inner, q = _unwrap(sampler)
        if not isinstance(inner, (Uniform, LogUniform, Normal)):
            raise ConfigError(
                f"Float.set_sampler({sampler!r}): a Float domain samples with Uniform(), "
                "LogUniform() or Normal(mean, sd), optionally inside Quantized(sampler, q).")
        bounded = math.isfinite(self.lower) and math.isfinite(self.upper)
        if isinstance(inner, Normal):
            if math.isfinite(self.lower) or math.isfinite(self.upper):
                raise ConfigError(
                    f"Float({self.lower}, {self.upper}).normal(): normal sampling does not "
                    "allow value bounds. Use Float(None, None).normal(mean, sd) or "
                    "tune.randn(mean, sd).")
        elif not bounded:
            raise ConfigError(
                f"Float({self.lower}, {self.upper}) with {inner}: uniform sampling requires a "
                "lower and an upper bound. Set both bounds of Float().")
        elif isinstance(inner, LogUniform):
            self._check_log(self.lower, self.upper, "loguniform")
        if q is not None:
            self._check_q(self.lower, self.upper, q, "quantized")
        self.sampler = sampler
        self.log = isinstance(inner, LogUniform)
        self.q = q
        if isinstance(inner, Normal):
            self.mean, self.sd = float(inner.mean), float(inner.sd)
            self._fn = "qrandn" if q is not None else "randn"
        else:
            self.mean = self.sd = None
            name = "loguniform" if self.log else "uniform"
            self._fn = f"q{name}" if q is not None else name
        if isinstance(inner, LogUniform):
            self.base = inner.base

    # -- Ray's builder methods --------------------------------------------------------------
    def uniform(self) -> Float:
        """This range, sampled uniformly (Ray's ``Float.uniform()``)."""
        new = self._copy()
        new.set_sampler(Uniform())
        return new

    def loguniform(self, base: float | None = None) -> Float:
        """This range, sampled uniformly in log space (needs ``0 < lower``)."""
        new = self._copy()
        new.set_sampler(LogUniform() if base is None else LogUniform(base))
        return new

    def normal(self, mean: float = 0.0, sd: float = 1.0) -> Float:
        """A normal distribution ``N(mean, sd**2)`` (Ray's ``Float.normal()``); the domain
        must be unbounded (``Float(None, None)``)."""
        _check_number("randn", "mean", mean)
        _check_number("randn", "sd", sd)
        if sd <= 0:
            raise ConfigError(
                f"tune.randn(mean={mean!r}, sd={sd!r}): sd must be > 0. "
                "Pass a positive standard deviation, e.g. sd=1.0."
            )
        new = self._copy()
        new.set_sampler(Normal(mean, sd))
        return new

    def quantized(self, q: float) -> Float:
        """This domain's sampler inside ``Quantized(sampler, q)``: samples rounded to a
        multiple of ``q`` (both bounds must be multiples of ``q``)."""
        new = self._copy()
        new.set_sampler(Quantized(new.get_sampler(), q), allow_override=True)
        return new

    def cast(self, value: Any) -> float:
        return float(value)

    def is_valid(self, value: float) -> bool:
        return bool(self.lower <= value <= self.upper)

    @property
    def domain_str(self) -> str:
        lower, upper = self._given
        return (f"({self.lower if lower is None else lower}, "
                f"{self.upper if upper is None else upper})")

    def _sample_one(self, rng: np.random.Generator | _LegacyRng, config: object) -> float:
        if self.mean is not None and self.sd is not None:
            value = float(rng.normal(self.mean, self.sd))
            if self.q is not None:
                value = _clean_float(round(value / self.q) * self.q)
            return value
        if not (math.isfinite(self.lower) and math.isfinite(self.upper)):
            raise ConfigError(
                f"Float({self.lower}, {self.upper}) has no sampler: call .normal() on it "
                "first (or give it bounds for .uniform() / .loguniform())."
            )
        lower, upper = self.lower, self.upper
        if self.q is not None:  # sample inside the grid's bounds, as Ray does
            lower = math.ceil(_clean_float(lower / self.q)) * self.q
            upper = math.floor(_clean_float(upper / self.q)) * self.q
        if self.log:
            value = math.exp(rng.uniform(math.log(lower), math.log(upper)))
        else:
            value = rng.uniform(lower, upper)
        if self.q is not None:
            value = _clean_float(round(value / self.q) * self.q)
            value = min(max(value, self.lower), self.upper)
        return float(value)

    def __repr__(self) -> str:
        if self._fn == "Float":
            return f"Float({self.lower!r}, {self.upper!r})"
        q = f", {self.q!r}" if self.q is not None else ""
        if self.mean is not None:
            return f"tune.{self._fn}({self.mean!r}, {self.sd!r}{q})"
        q = f", q={self.q!r}" if self.q is not None else ""
        base = f", base={self.base!r}" if self.log and self.base != 10 else ""
        return f"tune.{self._fn}({self.lower!r}, {self.upper!r}{q}{base})"


class Integer(Domain):
    """An integer in Ray's bounds: ``Integer(lower, upper)`` samples ``[lower, upper)``;
    quantized with ``q > 1`` it samples the multiples of ``q`` in ``[lower, upper]`` (upper
    inclusive), as Ray's ``Integer(lower, upper).quantized(q)`` does.

    :attr:`low` and :attr:`high` are the smallest and largest values it can draw (both
    inclusive); :attr:`lower` and :attr:`upper` are the bounds as given.

    Args:
        lower: Smallest value (inclusive).
        upper: Upper bound (exclusive; inclusive when quantized with ``q > 1``).
        log: Sample on a log scale; needs ``lower > 0``.
        base: Log base (descriptive only).
        q: Only multiples of ``q`` are sampled (uniformly, or on a log scale with ``log``).
    """

    __slots__ = ("_args", "_fn", "base", "high", "log", "low", "lower", "q", "sampler",
                 "upper")

    def __init__(
        self,
        lower: int,
        upper: int,
        *,
        log: bool = False,
        base: float = 10,
        q: int | None = None,
        _fn: str = "Integer",
        _args: tuple[int, ...] | None = None,
    ) -> None:
        self._fn = _fn
        self._args = _args if _args is not None else (lower, upper)
        self.sampler = None
        self.lower = lower
        self.upper = upper
        self.log = bool(log)
        self.base = base
        self.q = q
        if _fn != "Integer":  # a factory: tune.randint(...) etc. come with their sampler
            inner: Sampler = LogUniform(base) if log else Uniform()
            self.sampler = Quantized(inner, q) if q is not None else inner
        self._bounds()

    def _bounds(self) -> None:
        q = self.q
        self.low = int(self.lower)
        self.high = int(self.upper) if q is not None and q != 1 else int(self.upper) - 1
        if q is not None and q != 1:
            lo = math.ceil(self.low / q) * q
            hi = math.floor(self.high / q) * q
            if lo > hi:
                raise ConfigError(
                    f"{self!r}: no multiple of q={q} lies between {self.lower} and "
                    f"{self.upper}, so it has no values to sample. Widen the range or use a "
                    "smaller q."
                )
        elif self.low > self.high:
            raise ConfigError(f"{self!r}: the range is empty; lower must be less than upper.")
        if self.log and self.low <= 0:
            raise ConfigError(f"{self!r}: lower must be > 0 because values are on a log scale.")

    def _apply_sampler(self, sampler: Sampler) -> None:
        inner, q = _unwrap(sampler)
        if not isinstance(inner, (Uniform, LogUniform)):
            raise ConfigError(
                f"Integer.set_sampler({sampler!r}): an Integer domain samples with Uniform() or "
                "LogUniform(), optionally inside Quantized(sampler, q).")
        if isinstance(inner, LogUniform) and not self.lower > 0:
            raise ConfigError(
                f"Integer({self.lower}, {self.upper}).loguniform(): LogUniform requires a "
                f"lower bound greater than 0. Got: {self.lower}."
            )
        if q is not None:
            _check_number("quantized", "q", q, integer=True)
            q = int(q)
            if q <= 0:
                raise ConfigError(f"Integer.quantized(q={q!r}): q must be a positive integer.")
        old = (self.sampler, self.log, self.q, self._fn, self._args)
        self.sampler, self.log, self.q = sampler, isinstance(inner, LogUniform), q
        name = "lograndint" if self.log else "randint"
        self._fn = f"q{name}" if q is not None else name
        self._args = (*self._args[:2], q) if q is not None else self._args[:2]
        try:
            self._bounds()
        except ConfigError:
            self.sampler, self.log, self.q, self._fn, self._args = old
            self._bounds()
            raise

    def uniform(self) -> Integer:
        """This range, sampled uniformly (Ray's ``Integer.uniform()``)."""
        new = self._copy()
        new.set_sampler(Uniform())
        return new

    def loguniform(self, base: float | None = None) -> Integer:
        """This range, sampled on a log scale (needs ``0 < lower``)."""
        new = self._copy()
        new.set_sampler(LogUniform() if base is None else LogUniform(base))
        return new

    def quantized(self, q: int) -> Integer:
        """Only multiples of ``q`` (``Quantized(sampler, q)``); with ``q > 1`` the upper
        bound becomes inclusive."""
        new = self._copy()
        new.set_sampler(Quantized(new.get_sampler(), q), allow_override=True)
        return new

    def cast(self, value: Any) -> int:
        return int(value)

    def is_valid(self, value: float) -> bool:
        return bool(self.lower <= value <= self.upper)

    @property
    def domain_str(self) -> str:
        return f"({self.lower}, {self.upper})"

    def _sample_one(self, rng: np.random.Generator | _LegacyRng, config: object) -> int:
        if self.q is not None and self.q != 1:
            lo = math.ceil(self.low / self.q)
            hi = math.floor(self.high / self.q)
            if self.log:  # log-uniform over the grid's indices, as Ray's Quantized does
                index = math.floor(math.exp(rng.uniform(math.log(lo), math.log(hi + 1))))
                return int(min(max(index, lo), hi) * self.q)
            return int(self.q * int(rng.integers(lo, hi + 1)))
        if self.log:
            value = math.exp(rng.uniform(math.log(self.low), math.log(self.high + 1)))
            return int(min(max(math.floor(value), self.low), self.high))
        return int(rng.integers(self.low, self.high + 1))

    def __repr__(self) -> str:
        if self._fn == "Integer":
            return f"Integer({self.lower!r}, {self.upper!r})"
        return f"tune.{self._fn}({', '.join(repr(a) for a in self._args)})"


class Categorical(Domain):
    """One of ``categories``, chosen uniformly. Categories are returned as-is (not copied).

    ``Categorical(categories).grid()`` is Ray's spelling of ``tune.grid_search(categories)``
    and returns the same ``{"grid_search": [...]}`` marker.
    """

    __slots__ = ("categories", "sampler")

    def __init__(self, categories: Sequence[object]) -> None:
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
        self.sampler = None

    def _apply_sampler(self, sampler: Sampler) -> None:
        if not isinstance(sampler, Uniform):
            raise ConfigError(
                f"Categorical.set_sampler({sampler!r}): a Categorical domain samples with "
                "Uniform(); for a grid search over its categories use .grid() "
                "(tune.grid_search).")
        self.sampler = sampler

    def uniform(self) -> Categorical:
        """These categories, chosen uniformly (Ray's ``Categorical.uniform()``)."""
        new = self._copy()
        new.set_sampler(Uniform())
        return new

    def grid(self) -> dict[str, list[object]]:
        """These categories as a grid search: every one of them, in order."""
        return grid_search(self.categories)

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, item: SupportsIndex) -> object:
        return self.categories[item]

    def is_valid(self, value: object) -> bool:
        return value in self.categories

    @property
    def domain_str(self) -> str:
        return f"{self.categories}"

    def _sample_one(self, rng: np.random.Generator | _LegacyRng, config: object) -> object:
        return self.categories[int(rng.integers(0, len(self.categories)))]

    def _key(self) -> tuple[object, ...]:
        return (repr(self.categories),)

    def __repr__(self) -> str:
        return f"tune.choice({self.categories!r})"


class Function(Domain):
    """``sample_from(func)``: a value computed from the rest of the resolved config.

    ``func`` takes either no argument or one, ``spec``, where ``spec.config`` (also
    ``spec["config"]``) is the config with grid and random values already resolved, e.g.
    ``sample_from(lambda spec: spec.config.lr * 2)``.
    """

    __slots__ = ("func", "pass_spec", "sampler")

    default_sampler_cls = BaseSampler

    def __init__(self, func: Callable[..., object]) -> None:
        if not callable(func):
            raise ConfigError(
                f"tune.sample_from(func={func!r}): func must be callable, got "
                f"{type(func).__name__}. Write e.g. tune.sample_from(lambda spec: "
                "spec.config.lr * 2)."
            )
        self.func = func
        self.sampler = None
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

    @property
    def pass_config(self) -> bool:
        """Ray's name for :attr:`pass_spec`."""
        return self.pass_spec

    def sample(self, config: object = None, size: int = 1, random_state: RandomState = None,
               *, spec: object = None) -> Any:
        """Calls ``func(spec)`` (or ``func()``) ``size`` times; ``random_state`` is unused.
        ``config`` (Ray's argument) is passed as the spec when ``spec`` is not given."""
        config, _ = _split_sample_args(config, random_state)
        spec = config if spec is None else spec
        items = [self._call(spec) for _ in range(size)]
        return items if size > 1 else items[0]

    def _call(self, config: object) -> object:
        if not self.pass_spec:
            return self.func()
        try:
            return self.func(config)
        except (KeyError, AttributeError):
            if not isinstance(config, dict):
                raise
            return self.func(_Spec(config))  # the older ``spec.config[...]`` form

    def _sample_one(self, rng: np.random.Generator | _LegacyRng, config: object) -> object:
        return self._call(config)

    def is_function(self) -> bool:
        return True

    def is_valid(self, value: object) -> bool:
        return True

    @property
    def domain_str(self) -> str:
        return f"{self.func}()"

    def __repr__(self) -> str:
        return f"tune.sample_from({self.func!r})"


class _Spec:
    """``spec.config`` / ``spec["config"]`` around a config dict (older sample_from form)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config

    def __getitem__(self, key: str) -> dict[str, Any]:
        if key != "config":
            raise KeyError(key)
        return self.config


def is_grid_search(value: object) -> bool:
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


def _int_args(fn: str, lower: object, upper: object) -> None:
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
    return Integer(lower, upper, _fn="randint", _args=(lower, upper))


def _check_q_int(fn: str, lower: int, upper: int, q: int) -> None:
    _check_number(fn, "q", q, integer=True)
    if q <= 0:
        raise ConfigError(
            f"tune.{fn}(): q={q!r} is not allowed; q must be a positive integer, e.g. q=1."
        )
    if not lower <= upper:
        raise ConfigError(
            f"tune.{fn}(lower={lower!r}, upper={upper!r}, q={q!r}): lower must not exceed "
            f"upper. Swap the bounds: tune.{fn}({upper!r}, {lower!r}, {q!r})."
        )


def qrandint(lower: int, upper: int, q: int = 1) -> Integer:
    """An integer multiple of ``q`` in ``[lower, upper]``: ``upper`` is *inclusive*, except
    for ``q=1`` where it is exclusive (Ray's rule)."""
    _int_args("qrandint", lower, upper)
    _check_q_int("qrandint", lower, upper, q)
    return Integer(lower, upper, q=q, _fn="qrandint", _args=(lower, upper, q))


def _check_log_int(fn: str, lower: int, upper: int, base: float) -> None:
    if lower <= 0:
        raise ConfigError(
            f"tune.{fn}(lower={lower!r}, upper={upper!r}): lower must be > 0 because "
            "values are sampled on a log scale. Use lower=1, or tune.randint() for a linear "
            "scale."
        )
    if not lower < upper:
        raise ConfigError(
            f"tune.{fn}(lower={lower!r}, upper={upper!r}): lower must be less than upper."
        )
    _check_number(fn, "base", base)
    if base <= 0 or base == 1:
        raise ConfigError(
            f"tune.{fn}(): base={base!r} is not allowed; the log base must be > 0 and "
            "!= 1. Leave it at its default of 10."
        )


def lograndint(lower: int, upper: int, base: float = 10) -> Integer:
    """An integer in ``[lower, upper)`` sampled on a log scale; ``lower`` must be > 0."""
    _int_args("lograndint", lower, upper)
    _check_log_int("lograndint", lower, upper, base)
    return Integer(lower, upper, log=True, base=base, _fn="lograndint", _args=(lower, upper))


def qlograndint(lower: int, upper: int, q: int, base: float = 10) -> Integer:
    """An integer multiple of ``q`` sampled on a log scale between ``lower > 0`` and
    ``upper``: ``upper`` is inclusive, except for ``q=1`` (Ray's rule)."""
    _int_args("qlograndint", lower, upper)
    _check_q_int("qlograndint", lower, upper, q)
    _check_log_int("qlograndint", lower, upper, base)
    return Integer(lower, upper, log=True, base=base, q=q, _fn="qlograndint",
                   _args=(lower, upper, q))


def randn(mean: float = 0.0, sd: float = 1.0) -> Float:
    """A float from the normal distribution ``N(mean, sd**2)``:
    ``Float(None, None).normal(mean, sd)``, as in Ray."""
    return Float(None, None).normal(mean, sd)


def qrandn(mean: float, sd: float, q: float) -> Float:
    """``randn(mean, sd)`` rounded to a multiple of ``q``."""
    _check_number("qrandn", "q", q)
    if q <= 0:
        raise ConfigError(f"tune.qrandn(): q={q!r} is not allowed; q must be > 0.")
    return randn(mean, sd).quantized(q)


def choice(categories: Sequence[object]) -> Categorical:
    """One of ``categories``, sampled uniformly: ``Categorical(categories).uniform()``."""
    return Categorical(categories).uniform()


def grid_search(values: Sequence[object]) -> dict[str, list[object]]:
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


def sample_from(func: Callable[..., object]) -> Function:
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
        qlograndint,
        randn,
        qrandn,
        choice,
        grid_search,
        sample_from,
    }
)
