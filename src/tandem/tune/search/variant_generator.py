"""Turn a nested ``param_space`` into concrete configs (Ray Tune's variant-generation rules).

Rules:

* ``grid_search`` values form a cross product; the first grid in the space (in dict
  insertion order) varies fastest. A grid value may itself contain search-space objects.
* Other :class:`~tandem.tune.search.space.Domain` objects are sampled, once per variant.
* ``sample_from`` functions run last and see the otherwise resolved config as
  ``spec.config`` (attribute access ``spec.config.a.b`` and item access
  ``spec["config"]["a"]["b"]`` both work); one may depend on another.
* Dicts and lists are walked recursively; every other value is a constant and passes
  through unchanged (not copied). Tuples are constants too and may not contain domains.
* ``num_samples`` repeats the whole grid: ``num_samples * grid_size`` variants in total.

Objects that are almost certainly mistakes raise :class:`ConfigError` naming their key path
(``"train_loop_config/lr"``): a factory passed without being called (``tune.uniform``), a
``Domain`` class, Optuna / Ray Tune / hyperopt search-space objects, and sets.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from types import FunctionType
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem._core.records import record
from tandem.tune.search.space import (
    FACTORIES,
    GRID_SEARCH_KEY,
    Domain,
    Function,
    is_grid_search,
)

if TYPE_CHECKING:  # imported where a generator is made: a space of constants needs none
    import numpy as np

__all__ = [
    "Variant",
    "count_variants",
    "flatten_dict",
    "format_vars",
    "generate_variants",
    "has_search_space",
    "iter_variants",
    "make_rng",
    "merge_point",
    "needs_rng",
    "path_str",
    "resolve_config",
    "unflatten_dict",
    "validate_param_space",
]

Path = tuple[Any, ...]

# (module prefix, what it is, how to fix) for search-space objects of other libraries.
_FOREIGN_SPACES: tuple[tuple[str, str, str], ...] = (
    (
        "optuna.distributions",
        "an Optuna distribution",
        (
            "use tandem's functions (tune.uniform, tune.loguniform, tune.choice, ...), or give "
            "the Optuna distributions to OptunaSearch(space={...}) instead of param_space"
        ),
    ),
    (
        "ray.tune",
        "a Ray Tune search-space object",
        "import the same function from tandem: `from tandem import tune; tune.uniform(...)`",
    ),
    (
        "hyperopt",
        "a hyperopt expression",
        "use tandem's functions (tune.uniform, tune.choice, ...)",
    ),
)


def path_str(path: Path) -> str:
    """``("train_loop_config", "lr") -> "train_loop_config/lr"``."""
    return "/".join(str(p) for p in path)


def make_rng(seed: int | np.random.Generator | None) -> np.random.Generator:
    """A NumPy generator from a seed, an existing generator, or None (unseeded)."""
    import numpy as np

    if isinstance(seed, np.random.Generator):
        return seed
    if isinstance(seed, np.random.RandomState):
        return np.random.default_rng(seed.randint(0, 2**31 - 1))
    return np.random.default_rng(seed)


@record
class Variant:
    """One resolved config and the values chosen for its search-space entries.

    Attributes:
        config: The resolved config.
        resolved_vars: ``{"a/b": value}`` for every grid, random and ``sample_from`` entry.
    """

    config: dict[str, Any]
    resolved_vars: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- validation


def _mistake(value: object) -> str | None:
    """Why ``value`` is not allowed in a param space, or None if it is fine."""
    if isinstance(value, FunctionType) and value in FACTORIES:  # (a Domain is not hashed)
        name = getattr(value, "__name__", "?")
        return (
            f"the function tune.{name} itself was given, not called. Call it, e.g. "
            f"tune.{name}(...) with its bounds or values"
        )
    if isinstance(value, type) and issubclass(value, Domain):
        return (
            f"the class {value.__name__} was given instead of a search-space object. Create one "
            "with tandem's functions, e.g. tune.uniform(0.0, 1.0) or tune.choice([...])"
        )
    if isinstance(value, (set, frozenset)):
        return (
            f"a {type(value).__name__} is not a search space and not a JSON-friendly constant. "
            "To try each value use tune.grid_search([...]); to sample one use "
            "tune.choice([...]); for a constant collection pass a list or tuple"
        )
    module = type(value).__module__ or ""
    for prefix, what, fix in _FOREIGN_SPACES:
        if module == prefix or module.startswith(prefix + "."):
            return f"{type(value).__name__} is {what}; {fix}"
    return None


def validate_param_space(param_space: object, *, name: str = "param_space") -> None:
    """Raises :class:`ConfigError` for mistaken objects anywhere in ``param_space``.

    Args:
        param_space: The space to check (normally a dict).
        name: What to call it in messages.

    Raises:
        ConfigError: naming the key path, what was found and how to fix it.
    """
    if param_space is not None and not isinstance(param_space, Mapping):
        raise ConfigError(
            f"{name} must be a dict of config keys to values or search-space objects, got "
            f"{type(param_space).__name__}: {param_space!r}. Write e.g. "
            f'{name}={{"lr": tune.loguniform(1e-4, 1e-1)}}.'
        )
    _validate(param_space or {}, (), name, in_tuple=False)


def _validate(value: Any, path: Path, name: str, *, in_tuple: bool) -> None:
    where = f"{name}[{path_str(path)!r}]" if path else name
    problem = _mistake(value)
    if problem is not None:
        raise ConfigError(f"{where}: {problem}.")
    if isinstance(value, Domain) and in_tuple:
        raise ConfigError(
            f"{where}: {value!r} is inside a tuple, where search-space objects are not "
            "resolved. Use a list instead of the tuple."
        )
    if is_grid_search(value):
        values = value[GRID_SEARCH_KEY]
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"{where}: {{'grid_search': {values!r}}} needs a non-empty list of values. "
                "Write tune.grid_search([v1, v2, ...])."
            )
        if in_tuple:
            raise ConfigError(f"{where}: grid_search inside a tuple is not resolved; use a list.")
        for i, v in enumerate(values):
            _validate(v, (*path, GRID_SEARCH_KEY, i), name, in_tuple=False)
    elif isinstance(value, Mapping):
        for k, v in value.items():
            _validate(v, (*path, k), name, in_tuple=in_tuple)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _validate(v, (*path, i), name, in_tuple=in_tuple or isinstance(value, tuple))


def has_search_space(param_space: object) -> bool:
    """True if ``param_space`` contains any grid search or ``Domain``."""
    return any(True for _ in _unresolved(param_space, ()))


# --------------------------------------------------------------------------- walking


def _unresolved(value: object, path: Path) -> Iterator[tuple[Path, Any]]:
    """Yields ``(path, value)`` for each grid search or Domain, not descending into them."""
    if isinstance(value, Domain) or is_grid_search(value):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _unresolved(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _unresolved(v, (*path, i))


def needs_rng(*spaces: object) -> bool:
    """Whether resolving ``spaces`` may draw a random value: they hold a Domain anywhere
    (in a grid search's values too). A space of constants and plain grids draws nothing, so
    no generator (and no NumPy) is needed for it."""
    stack = list(spaces)
    while stack:
        value = stack.pop()
        if isinstance(value, Domain):
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return False


def _copy_containers(value: object) -> Any:
    """Copies dicts and lists (recursively); leaves are shared, not copied."""
    if isinstance(value, dict) and not is_grid_search(value):
        return {k: _copy_containers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_containers(v) for v in value]
    return value


def _set_path(root: Any, path: Path, value: Any) -> None:
    node = root
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value


def count_variants(param_space: Mapping[str, object] | None) -> int:
    """The number of variants one grid pass yields (1 when there is no grid)."""
    total = 1
    for _, value in _unresolved(dict(param_space or {}), ()):
        if is_grid_search(value):
            total *= sum(count_variants({"_": v}) for v in value[GRID_SEARCH_KEY])
    return total


# --------------------------------------------------------------------------- resolution


def _expand_grid(spec: dict[str, object]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Yields ``(spec with every grid replaced, {path: grid value})`` for each grid point."""
    grids = [(p, v[GRID_SEARCH_KEY]) for p, v in _unresolved(spec, ()) if is_grid_search(v)]
    if not grids:
        yield spec, {}
        return
    # product() varies its last argument fastest; reverse so the first grid varies fastest.
    for combo in itertools.product(*(values for _, values in reversed(grids))):
        chosen = list(zip([p for p, _ in grids], reversed(combo)))
        new_spec = _copy_containers(spec)
        grid_vars: dict[str, Any] = {}
        for path, value in chosen:
            _set_path(new_spec, path, _copy_containers(value))
            grid_vars[path_str(path)] = value
        for sub_spec, sub_vars in _expand_grid(new_spec):  # grid values may hold grids
            yield sub_spec, {**grid_vars, **sub_vars}


class _Unresolved(Exception):
    """A ``sample_from`` function read a value that is itself still unresolved."""


class _AttrView(Mapping[str, Any]):
    """Read-only view of a config dict with attribute access, for ``sample_from`` specs."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[Any, Any]) -> None:
        self._data = data

    def __getitem__(self, key: object) -> Any:
        value = self._data[key]
        if isinstance(value, Function):
            raise _Unresolved(key)
        if isinstance(value, Mapping):
            return _AttrView(value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError:
            raise AttributeError(
                f"the config has no key {name!r}; its keys are {sorted(map(str, self._data))}"
            ) from None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"_AttrView({self._data!r})"


def resolve_config(
    spec: Mapping[str, object],
    rng: np.random.Generator | None,
    *,
    fixed: Mapping[Path, object] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Resolves every Domain and ``sample_from`` in a grid-free ``spec``.

    Args:
        spec: A param space without grid searches (see :func:`generate_variants`).
        rng: Generator used for sampling.
        fixed: Values to use for some paths instead of sampling them (used by searchers
            such as Optuna that choose values themselves).

    Returns:
        ``(config, resolved_vars)``.

    Raises:
        ConfigError: if a grid search is left, or ``sample_from`` functions fail or depend
            on each other in a cycle.
    """
    config = _copy_containers(spec)
    resolved: dict[str, Any] = {}
    fixed = dict(fixed or {})
    functions: list[tuple[Path, Function]] = []
    for path, value in list(_unresolved(config, ())):
        if path in fixed:
            value = fixed.pop(path)
            _set_path(config, path, value)
            resolved[path_str(path)] = value
        elif isinstance(value, Function):
            functions.append((path, value))
        elif isinstance(value, Domain):
            sampled = value.sample(random_state=rng)
            _set_path(config, path, sampled)
            resolved[path_str(path)] = sampled
        else:  # a grid search
            raise ConfigError(
                f"param_space[{path_str(path)!r}]: grid_search is not supported here. "
                "Use BasicVariantGenerator (the default searcher) for grid search, or replace "
                "it with tune.choice([...])."
            )
    for path, value in fixed.items():  # values for paths the space does not sample
        _set_path(config, path, value)
        resolved[path_str(path)] = value
    _resolve_functions(config, functions, resolved)
    return config, resolved


def _resolve_functions(
    config: dict[str, Any], pending: list[tuple[Path, Function]], resolved: dict[str, object]
) -> None:
    # Ray 2.x passes the config itself (``lambda config: config["a"]``); the older
    # ``lambda spec: spec.config.a`` form is tried when that raises KeyError/AttributeError.
    view = _AttrView(config)
    spec = _AttrView({"config": config})
    while pending:
        waiting: list[tuple[Path, Function]] = []
        for path, fn in pending:
            try:
                try:
                    value = fn.sample(spec=view)
                except (KeyError, AttributeError):
                    value = fn.sample(spec=spec)
            except _Unresolved:
                waiting.append((path, fn))
                continue
            except Exception as exc:
                raise ConfigError(
                    f"param_space[{path_str(path)!r}]: the sample_from function {fn.func!r} "
                    f"raised {type(exc).__name__}: {exc}. It is called with the resolved "
                    "config (or, in the older form, a spec whose `config` is it); fix the "
                    "function."
                ) from exc
            _set_path(config, path, value)
            resolved[path_str(path)] = value
        if len(waiting) == len(pending):
            paths = [path_str(p) for p, _ in waiting]
            raise ConfigError(
                f"param_space: the sample_from functions at {paths} depend on each other in a "
                "cycle, so none can be resolved. Make at least one of them depend only on "
                "plain or sampled values."
            )
        pending = waiting


def merge_point(param_space: Mapping[str, object], point: Mapping[str, object]) -> dict[str, Any]:
    """``param_space`` with the values of ``point`` (a partial nested config) put in place.

    Raises:
        ConfigError: if ``point`` names a key that ``param_space`` lacks.
    """
    merged = _copy_containers(dict(param_space))
    _merge_into(merged, point, ())
    return merged


def _merge_into(spec: dict[str, object], point: Mapping[str, object], path: Path) -> None:
    if not isinstance(point, Mapping):
        raise ConfigError(
            f"points_to_evaluate: each point must be a dict (a partial config), got "
            f"{type(point).__name__}: {point!r}."
        )
    for key, value in point.items():
        here = (*path, key)
        if key not in spec:
            raise ConfigError(
                f"points_to_evaluate: key {path_str(here)!r} is not in the param space. "
                f"Keys at {path_str(path) or 'the top level'!r}: {sorted(map(str, spec))}. "
                "Fix the spelling or add the key to param_space."
            )
        current = spec[key]
        if (
            isinstance(value, Mapping)
            and isinstance(current, dict)
            and not is_grid_search(current)
            and not is_grid_search(value)
        ):
            _merge_into(current, value, here)
        else:
            spec[key] = value


def generate_variants(
    param_space: Mapping[str, object] | None, rng: np.random.Generator | None,
    *, constant_grid_search: bool = False,
) -> Iterator[Variant]:
    """One pass over the grid: yields :func:`count_variants` variants, sampled with ``rng``.

    With ``constant_grid_search`` the random values outside the grids are sampled once,
    before the grid is expanded, so every grid point of the pass shares them (Ray's
    ``BasicVariantGenerator(constant_grid_search=True)``); else each grid point samples its
    own.

    Raises:
        ConfigError: for mistaken objects in ``param_space`` (see module docstring).
    """
    validate_param_space(param_space)
    yield from _variants(param_space, rng, constant_grid_search)


def _variants(param_space: Mapping[str, object] | None, rng: np.random.Generator | None,
              constant_grid_search: bool) -> Iterator[Variant]:
    """:func:`generate_variants` of a space already validated."""
    spec = _copy_containers(dict(param_space or {}))
    constant: dict[str, Any] = {}
    if constant_grid_search:
        for path, value in list(_unresolved(spec, ())):
            if isinstance(value, Domain) and not isinstance(value, Function):
                sampled_value = value.sample(random_state=rng)
                _set_path(spec, path, sampled_value)
                constant[path_str(path)] = sampled_value
    for grid_spec, grid_vars in _expand_grid(spec):
        config, sampled = resolve_config(grid_spec, rng)
        yield Variant(config=config, resolved_vars={**constant, **grid_vars, **sampled})


def iter_variants(
    param_space: Mapping[str, object] | None,
    num_samples: int = 1,
    *,
    seed: int | np.random.Generator | None = None,
    points_to_evaluate: Sequence[Mapping[str, object]] | None = None,
    constant_grid_search: bool = False,
) -> Iterator[Variant]:
    """Every variant of an experiment, lazily: ``num_samples`` passes over the grid.

    Each of ``points_to_evaluate`` replaces one of the passes (Ray's rule): its values are
    put into the space, and what it leaves open is still expanded and sampled. Points beyond
    ``num_samples`` still run.

    Args:
        param_space: The space.
        num_samples: Passes over the grid; ``-1`` means forever.
        seed: Seed or generator; the same seed gives the same variants.
        points_to_evaluate: Partial configs to run first.
        constant_grid_search: See :func:`generate_variants`.
    """
    _check_num_samples(num_samples)
    validate_param_space(param_space)
    space = dict(param_space or {})
    points = list(points_to_evaluate or [])
    rng = make_rng(seed) if needs_rng(space, points) else None  # None: nothing is drawn
    merged = [merge_point(space, p) for p in points]  # validate every point up front
    for spec in merged:
        yield from generate_variants(spec, rng, constant_grid_search=constant_grid_search)
    passes = itertools.count() if num_samples == -1 else range(num_samples - len(points))
    for _ in passes:  # the space was validated above: not again for each pass
        yield from _variants(space, rng, constant_grid_search)


def _check_num_samples(num_samples: object) -> None:
    if (
        isinstance(num_samples, bool)
        or not isinstance(num_samples, int)
        or (num_samples < 1 and num_samples != -1)
    ):
        raise ConfigError(
            f"num_samples={num_samples!r} is not allowed; it must be a positive integer, or -1 "
            "to sample until the experiment is stopped. Set e.g. TuneConfig(num_samples=10)."
        )


# --------------------------------------------------------------------------- helpers


def flatten_dict(
    config: Mapping[str, object], delimiter: str = "/", prefix: str = ""
) -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": 2} -> {"a/b": 1, "c": 2}``; lists and other values are leaves.

    Used for dataframe columns: ``flatten_dict(config, prefix="config/")`` gives
    ``config/<key>`` names. An empty nested dict is kept as a leaf.
    """
    out: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten_dict(value, delimiter, name + delimiter))
        else:
            out[name] = value
    return out


def unflatten_dict(flat: Mapping[str, object], delimiter: str = "/") -> dict[str, Any]:
    """The inverse of :func:`flatten_dict`."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        parts = key.split(delimiter)
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
    return out


def format_vars(resolved_vars: Mapping[str, object]) -> str:
    """A short tag such as ``"lr=0.0012,bs=32"`` for trial names (last key part, 4 digits)."""
    parts = []
    for path, value in resolved_vars.items():
        key = str(path).rsplit("/", 1)[-1]
        if isinstance(value, float):
            text = f"{value:.4g}"
        elif isinstance(value, (int, str, bool)) or value is None:
            text = str(value)
        else:
            text = type(value).__name__
        parts.append(f"{key}={text}")
    return ",".join(parts)
