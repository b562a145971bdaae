"""What the train server asks of a job's runner beyond ``JobRunner`` (jobs layer): each a
small Protocol a runner implements when it has something to do then (a train run does all
three; a runner without one is left alone at that point).

- ``LoadCheck.check_loadable()``: when a job arrives, raises (e.g. ``ModuleNotFoundError``)
  if its code cannot be loaded in this process, so the client hears it at submission.
- ``RuntimeEnvTaker.apply_runtime_env(working_dir, env_vars)``: before queuing, run the
  workers in the uploaded ``working_dir`` (first on their import path) with ``env_vars``.
- ``Requeueable.on_requeue(checkpoint_path)``: when a restarted server re-runs a job cut off
  by the restart, resume from the latest committed checkpoint it recorded (or from what
  the earlier run left behind).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, runtime_checkable

__all__ = ["LoadCheck", "Requeueable", "RuntimeEnvTaker"]


@runtime_checkable
class LoadCheck(Protocol):
    def check_loadable(self) -> None:
        """Raises if the job's code cannot be loaded in this process."""


@runtime_checkable
class RuntimeEnvTaker(Protocol):
    def apply_runtime_env(self, working_dir: str | None, env_vars: Mapping[str, str]) -> None:
        """Runs the workers in ``working_dir`` (first on their import path) with ``env_vars``."""


@runtime_checkable
class Requeueable(Protocol):
    def on_requeue(self, checkpoint_path: str | None) -> None:
        """Resumes from ``checkpoint_path`` (or what the earlier run left) when re-run."""
