"""Stop criteria: ``RunConfig(stop=...)`` as a dict of thresholds, a function, or a Stopper."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError


class Stopper:
    """``__call__(trial_id, result) -> bool`` stops one trial; ``stop_all()`` ends the experiment."""

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


class DictStopper(Stopper):
    """Stops a trial once ``result[key] >= value`` for any key (e.g. ``training_iteration``)."""

    def __init__(self, criteria: Mapping[str, Any]) -> None:
        for key, value in criteria.items():
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(
                    f"RunConfig(stop={dict(criteria)!r}): the threshold for {key!r} must be a "
                    f"number, got {value!r}."
                )
        self.criteria = dict(criteria)

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        for key, value in self.criteria.items():
            got = result.get(key)
            if isinstance(got, (int, float)) and got >= value:
                return True
        return False


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
