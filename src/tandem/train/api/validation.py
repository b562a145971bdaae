"""Checks shared by the train layer's public constructors."""

from __future__ import annotations

import inspect
import weakref

from tandem._core.errors import ConfigError

#: functions already checked -> whether they take the config: a tuner builds one run
#: description per trial around the same function (``inspect.signature`` costs ~0.2 ms)
_CHECKED: weakref.WeakKeyDictionary[object, bool] = weakref.WeakKeyDictionary()


def check_train_fn(fn: object, what: str = "train_loop_per_worker") -> bool:
    """Validates a train function; returns whether it takes the config argument.

    Raises:
        ConfigError: not callable, or more than one required parameter.
    """
    try:
        return _CHECKED[fn]
    except (KeyError, TypeError):  # not seen yet, or not weakly referable / hashable
        pass
    takes = _check_train_fn(fn, what)
    try:
        _CHECKED[fn] = takes
    except TypeError:
        pass
    return takes


def _check_train_fn(fn: object, what: str) -> bool:
    if not callable(fn):
        raise ConfigError(
            f"{what} must be a function such as `def train_func(config): ...`, got "
            f"{type(fn).__name__} {fn!r:.60}."
        )
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    kw_required = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    if len(required) > 1 or kw_required:
        names = ", ".join(p.name for p in required + kw_required)
        raise ConfigError(
            f"{what} {getattr(fn, '__name__', fn)!r} takes {len(required) + len(kw_required)} "
            f"required parameters ({names}); it may take none or one (the config dict). "
            f"Put other values into train_loop_config, or bind them with functools.partial."
        )
    return bool(positional) or any(p.kind is p.VAR_POSITIONAL for p in params)
