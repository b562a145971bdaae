# Parts of this file are adapted from Ray (https://github.com/ray-project/ray),
# python/ray/tune/search/__init__.py, search/variant_generator.py, _private/dict.py,
# tune/utils/util.py and air/_internal/util.py.
# Copyright 2023 The Ray Authors. Licensed under the Apache License, Version 2.0
# (http://www.apache.org/licenses/LICENSE-2.0); modified for tandem.
"""What the library searchers (HyperOpt, BayesOpt, Nevergrad, ...) need from Ray's helpers.

Ray's wrappers read a search space through Ray's ``Domain`` objects: ``domain.get_sampler()``
returns a ``Uniform``/``LogUniform``/``Normal`` sampler, possibly inside ``Quantized``,
and an ``Integer``'s ``upper`` is exclusive. tandem's domains store the same facts as
attributes too (``Float.log``, ``.q``; ``Integer.low``/``.high`` both inclusive). :func:`view` gives a read-only Ray-shaped view of a tandem domain, and
:func:`parse_spec_vars` yields those views, so the converters ported from Ray keep Ray's
code and therefore Ray's exact conversions.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from tandem.tune.search import space as _space
from tandem.tune.search.space import is_grid_search
from tandem.tune.search.variant_generator import (
    _copy_containers,
    has_search_space,
    resolve_config,
)

__all__ = [
    "DEFAULT_METRIC",
    "UNDEFINED_METRIC_MODE",
    "UNDEFINED_SEARCH_SPACE",
    "UNRESOLVED_SEARCH_SPACE",
    "Categorical",
    "Domain",
    "Float",
    "Function",
    "Integer",
    "LogUniform",
    "Normal",
    "Quantized",
    "Uniform",
    "assign_value",
    "flatten_dict",
    "is_nan_or_inf",
    "merge_suggestion",
    "parse_spec_vars",
    "unflatten_dict",
    "unflatten_list_dict",
    "validate_warmstart",
    "view",
]

#: Ray's anonymous metric (``ray.tune.result.DEFAULT_METRIC``).
DEFAULT_METRIC = "_metric"

UNRESOLVED_SEARCH_SPACE = ("You passed a `{par}` parameter to {cls} that contained unresolved search "
    "space definitions. {cls} should however be instantiated with fully "
    "configured search spaces only. To use Ray Tune's automatic search space "
    "conversion, pass the space definition as part of the `param_space` argument "
    "to `tune.Tuner()` instead.")

UNDEFINED_SEARCH_SPACE = ("Trying to sample a configuration from {cls}, but no search "
    "space has been defined. Either pass the `{space}` argument when "
    "instantiating the search algorithm, or pass a `param_space` to "
    "`tune.Tuner()`.")

UNDEFINED_METRIC_MODE = ("Trying to sample a configuration from {cls}, but the `metric` "
    "({metric}) or `mode` ({mode}) parameters have not been set. "
    "Either pass these arguments when instantiating the search algorithm, "
    "or pass them to `tune.TuneConfig()`.")


# --------------------------------------------------------------------------- samplers
# The domains' own sampler classes (``tandem.tune.search.sample``), re-exported here.
Sampler = _space.Sampler
Uniform = _space.Uniform
LogUniform = _space.LogUniform
Normal = _space.Normal
Quantized = _space.Quantized
Grid = _space.Grid


# --------------------------------------------------------------------------- views


class Domain:
    """A Ray-shaped, read-only view of one tandem domain (or grid search)."""

    def __init__(self, source: Any, sampler: Sampler | None) -> None:
        self.source = source
        self.sampler = sampler

    def get_sampler(self) -> Sampler | None:
        return self.sampler

    def is_grid(self) -> bool:
        return isinstance(self.sampler, Grid)

    def is_function(self) -> bool:
        return False

    def sample(self, config: object = None, size: int = 1, random_state: Any = None) -> Any:
        return self.source.sample(np.random.default_rng(random_state))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.source!r})"


class Float(Domain):
    def __init__(self, source: Any, lower: float | None, upper: float | None,
                 sampler: Sampler) -> None:
        super().__init__(source, sampler)
        self.lower = lower
        self.upper = upper


class Integer(Domain):
    """``upper`` is exclusive, as in Ray."""

    def __init__(self, source: Any, lower: int, upper: int, sampler: Sampler) -> None:
        super().__init__(source, sampler)
        self.lower = lower
        self.upper = upper


class Categorical(Domain):
    def __init__(self, source: Any, categories: list[Any], sampler: Sampler) -> None:
        super().__init__(source, sampler)
        self.categories = categories

    def __len__(self) -> int:
        return len(self.categories)

    def __getitem__(self, i: int) -> Any:
        return self.categories[i]


class Function(Domain):
    def is_function(self) -> bool:
        return True


def view(domain: Any) -> Domain:
    """The Ray-shaped view of a tandem ``Domain`` or ``{"grid_search": [...]}``."""
    if isinstance(domain, Domain):
        return domain
    if is_grid_search(domain):
        return Categorical(domain, list(domain["grid_search"]), Grid())
    if isinstance(domain, _space.Float):
        lower = None if math.isinf(domain.lower) else domain.lower
        upper = None if math.isinf(domain.upper) else domain.upper
        return Float(domain, lower, upper, domain.get_sampler())
    if isinstance(domain, _space.Integer):
        sampler: Sampler = LogUniform(domain.base) if domain.log else Uniform()
        if domain.q is not None:
            sampler = Quantized(sampler, domain.q)
        return Integer(domain, domain.low, domain.high + 1, sampler)
    if isinstance(domain, _space.Categorical):
        return Categorical(domain, list(domain.categories), Uniform())
    if isinstance(domain, _space.Function):
        return Function(domain, None)
    raise TypeError(f"{domain!r} is not a search-space object (tune.uniform(...), ...)")


def _is_unresolved(value: object) -> bool:
    return isinstance(value, (_space.Domain, Domain)) or is_grid_search(value)


def _split(spec: Mapping[object, object]) -> tuple[dict[tuple, Any], dict[tuple, Any]]:
    """Ray's ``_split_resolved_unresolved_values`` over tandem values."""
    resolved: dict[tuple, Any] = {}
    unresolved: dict[tuple, Any] = {}
    for k, v in spec.items():
        if _is_unresolved(v):
            unresolved[(k,)] = view(v)
        elif isinstance(v, dict):
            r, u = _split(v)
            resolved.update({(k, *p): x for p, x in r.items()})
            unresolved.update({(k, *p): x for p, x in u.items()})
        elif isinstance(v, (list, tuple)):
            for i, elem in enumerate(v):
                r, u = _split({i: elem})
                resolved.update({(k, *p): x for p, x in r.items()})
                unresolved.update({(k, *p): x for p, x in u.items()})
        else:
            resolved[(k,)] = v
    return resolved, unresolved


def parse_spec_vars(
    spec: Mapping[object, object],
) -> tuple[list[tuple[tuple, Any]], list[tuple[tuple, Domain]], list[tuple[tuple, Domain]]]:
    """Ray's ``parse_spec_vars``: (resolved, domain, grid) variables with their paths.

    Domains come back as Ray-shaped views (:func:`view`). ``sample_from`` values are left
    out (Ray lists them, and its library searchers then refuse them): tandem computes them
    after the library has chosen the other values (:func:`merge_suggestion`).
    """
    resolved, unresolved = _split(spec)
    unresolved = {p: v for p, v in unresolved.items() if not v.is_function()}
    grid_vars = sorted(
        ((p, v) for p, v in unresolved.items() if v.is_grid()), key=lambda pv: str(pv[0])
    )
    domain_vars = [(p, v) for p, v in unresolved.items() if not v.is_grid()]
    return list(resolved.items()), domain_vars, grid_vars


def assign_value(spec: dict[object, object], path: tuple, value: object) -> None:
    """Ray's ``assign_value``: sets ``spec[path...] = value`` (rebuilding tuples)."""
    parent_spec: Any = None
    parent_key: Any = None
    node: Any = spec
    for k in path[:-1]:
        parent_spec = node
        parent_key = k
        node = node[k]
    key = path[-1]
    if not isinstance(node, tuple):
        node[key] = value
    else:
        if parent_spec is None:
            raise ValueError("Cannot assign value to a tuple.")
        assert isinstance(key, int), "Tuple key must be an int."
        parent_spec[parent_key] = node[:key] + (value,) + node[key + 1 :]


def flatten_dict(
    dt: Mapping[Any, Any],
    delimiter: str = "/",
    prevent_delimiter: bool = False,
    flatten_list: bool = False,
) -> dict[Any, Any]:
    """Ray's ``flatten_dict`` (``ray.tune.utils.flatten_dict``)."""

    def _raise_delimiter_exception() -> None:
        raise ValueError(
            f"Found delimiter `{delimiter}` in key when trying to flatten "
            f"array. Please avoid using the delimiter in your specification."
        )

    out = dict(copy.copy(dt))
    if prevent_delimiter and any(delimiter in key for key in out):
        _raise_delimiter_exception()
    while_check: tuple[type, ...] = (dict, list) if flatten_list else (dict,)
    while any(isinstance(v, while_check) for v in out.values()):
        remove = []
        add = {}
        for key, value in out.items():
            if isinstance(value, dict):
                for subkey, v in value.items():
                    if prevent_delimiter and delimiter in subkey:
                        _raise_delimiter_exception()
                    add[delimiter.join([str(key), str(subkey)])] = v
                remove.append(key)
            elif flatten_list and isinstance(value, list):
                for i, v in enumerate(value):
                    add[delimiter.join([str(key), str(i)])] = v
                remove.append(key)
        out.update(add)
        for k in remove:
            del out[k]
    return out


def unflatten_dict(dt: Mapping[str, object], delimiter: str = "/") -> dict[str, Any]:
    """Ray's ``unflatten_dict``."""
    out: dict[str, Any] = {}
    for key, val in dt.items():
        path = key.split(delimiter)
        item = out
        for k in path[:-1]:
            item = item.setdefault(k, {})
            if not isinstance(item, dict):
                raise TypeError(
                    f"Cannot unflatten dict due the key '{key}' having a parent key '{k}', "
                    f"which value is not of type {dict} (got {type(item)}). Change the key "
                    "names to resolve the conflict."
                )
        item[path[-1]] = val
    return out


def unflatten_list_dict(dt: Mapping[str, object], delimiter: str = "/") -> Any:
    """Ray's ``unflatten_list_dict``: nested dicts and lists from ``"a/0/b"`` keys."""
    out_type: type = list if next(iter(dt)).split(delimiter, 1)[0].isdigit() else dict
    out: Any = out_type()
    for key, val in dt.items():
        path = key.split(delimiter)
        item = out
        for i, k in enumerate(path[:-1]):
            next_type: type = list if path[i + 1].isdigit() else dict
            if isinstance(item, dict):
                item = item.setdefault(k, next_type())
            elif isinstance(item, list):
                if int(k) >= len(item):
                    item.append(next_type())
                item = item[int(k)]
        if isinstance(item, dict):
            item[path[-1]] = val
        elif isinstance(item, list):
            item.append(val)
    return out


def is_nan_or_inf(value: Any) -> bool:
    return bool(np.isnan(value) or np.isinf(value))


def validate_warmstart(
    parameter_names: list[str],
    points_to_evaluate: list[list[object] | dict[str, object]] | None,
    evaluated_rewards: list[object] | None,
    validate_point_name_lengths: bool = True,
) -> None:
    """Ray's ``validate_warmstart``: type and length checks of a searcher's warm start."""
    if points_to_evaluate:
        if not isinstance(points_to_evaluate, list):
            raise TypeError(
                f"points_to_evaluate expected to be a list, got {type(points_to_evaluate)}."
            )
        for point in points_to_evaluate:
            if not isinstance(point, (dict, list)):
                raise TypeError(
                    f"points_to_evaluate expected to include list or dict, got {point}."
                )
            if validate_point_name_lengths and (not len(point) == len(parameter_names)):
                raise ValueError(
                    f"Dim of point {point} and parameter_names {parameter_names} do not match."
                )
    if points_to_evaluate and evaluated_rewards:
        if not isinstance(evaluated_rewards, list):
            raise TypeError(
                f"evaluated_rewards expected to be a list, got {type(evaluated_rewards)}."
            )
        if not len(evaluated_rewards) == len(points_to_evaluate):
            raise ValueError(
                f"Dim of evaluated_rewards {evaluated_rewards} and points_to_evaluate "
                f"{points_to_evaluate} do not match."
            )


# --------------------------------------------------------------------------- configs


def _unflatten_into(spec: object, suggestion: Mapping[Any, Any], path: tuple) -> dict[tuple, Any]:
    """``{path: value}`` for every leaf of ``suggestion``, following ``spec``'s shape (a
    dict in the suggestion where the spec has a search-space object is a value)."""
    out: dict[tuple, Any] = {}
    for key, value in suggestion.items():
        here = (*path, key)
        sub = None
        if isinstance(spec, dict):
            sub = spec.get(key)
        elif isinstance(spec, (list, tuple)) and isinstance(key, int) and key < len(spec):
            sub = spec[key]
        if isinstance(value, dict) and isinstance(sub, dict) and not is_grid_search(sub):
            out.update(_unflatten_into(sub, value, here))
        elif isinstance(value, (list, tuple)) and isinstance(sub, (list, tuple)) \
                and len(value) == len(sub):
            out.update(_unflatten_into(sub, dict(enumerate(value)), here))
        else:
            out[here] = value
    return out


def _plain(value: object) -> Any:
    """NumPy scalars as Python numbers (configs are written as JSON)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def merge_suggestion(
    param_space: Mapping[str, object] | None, suggestion: Mapping[str, object],
    rng: np.random.Generator,
) -> dict[str, Any]:
    """The trial's full config: ``param_space`` with the library's ``suggestion`` put in
    place, constants kept and ``sample_from`` values computed (Ray's SearchGenerator does
    the same merge)."""
    suggestion = _plain(suggestion)
    spec = _copy_containers(dict(param_space or {}))
    if not spec:
        return copy.deepcopy(dict(suggestion))
    # a library may hand back the space's own sample_from objects: those stay to resolve
    fixed = {
        p: v for p, v in _unflatten_into(spec, suggestion, ()).items() if not _is_unresolved(v)
    }
    if not has_search_space(spec):
        for path, value in fixed.items():
            node: Any = spec
            for k in path[:-1]:
                node = node.setdefault(k, {}) if isinstance(node, dict) else node[k]
            node[path[-1]] = value
        return spec
    config, _ = resolve_config(spec, rng, fixed=fixed)
    return config
