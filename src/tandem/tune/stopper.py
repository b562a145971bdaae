"""Stop criteria: ``RunConfig(stop=...)`` as a dict of thresholds, a function, or a Stopper."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError

logger = logging.getLogger(__name__)


class Stopper:
    """``__call__(trial_id, result) -> bool`` stops one trial; ``stop_all()`` ends the experiment."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


class DictStopper(Stopper):
    """Ray Tune's dict criteria: a trial stops at the first result where, for any key,
    ``result[key] >= value`` (nested keys as ``"a/b"``). A boolean works as Ray's does:
    ``{"done": True}`` stops once the trial reports a truthy ``done``. A result with
    ``done`` true ends its trial whatever the criteria."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        for key, value in criteria.items():
            if isinstance(value, Mapping):
                raise ConfigError(
                    f"RunConfig(stop={dict(criteria)!r}): nest criteria with '/' in the key "
                    f"(e.g. {{'{key}/<inner key>': value}}), not as a dict."
                )
            if not isinstance(value, (int, float)):
                raise ConfigError(
                    f"RunConfig(stop={dict(criteria)!r}): the threshold for {key!r} must be a "
                    f"number or a bool (the trial stops once result[{key!r}] >= it), got "
                    f"{value!r}."
                )
        self.criteria = dict(criteria)
        self._warned: set[str] = set()

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        if result.get("done"):
            return True
        for key, value in self.criteria.items():
            got = _lookup(result, key)
            if got is _MISSING:
                if key not in self._warned:
                    self._warned.add(key)
                    logger.warning(
                        "Stopping criterion %r not found in the result; available keys are %s. "
                        "If %r is never reported, the trial runs until it ends.",
                        key, sorted(result), key)
                continue
            try:
                if got >= value:
                    return True
            except TypeError as e:
                raise ConfigError(
                    f"RunConfig(stop={{{key!r}: {value!r}}}): the trial reported {key}={got!r}, "
                    f"which cannot be compared with {value!r}; report a number or a bool."
                ) from e
        return False


_MISSING = object()


def _lookup(result: Mapping[str, Any], key: str) -> Any:
    if key in result:
        return result[key]
    node: Any = result
    for part in key.split("/"):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


class FunctionStopper(Stopper):
    def __init__(self, fn: Callable[[str, dict], bool]) -> None:
        self.fn = fn

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return bool(self.fn(trial_id, result))


def make_stopper(stop: Any) -> Stopper | None:
    if stop is None:
        return None
    if isinstance(stop, Stopper):
        return stop
    if isinstance(stop, Mapping):
        return DictStopper(stop)
    if callable(getattr(stop, "stop_all", None)) and callable(stop):
        return stop  # a duck-typed Stopper (e.g. written for Ray Tune)
    if callable(stop):
        return FunctionStopper(stop)
    raise ConfigError(
        f"RunConfig(stop={stop!r}) is not understood: give a dict of thresholds such as "
        f"{{'training_iteration': 10}}, a function (trial_id, result) -> bool, or a Stopper."
    )
