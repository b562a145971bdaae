"""``tune.report``, ``tune.get_checkpoint``, ``tune.get_context`` — inside a trial.

A trial runs in a train worker, so these are the train session's functions with tuning's
names. ``tune.report`` takes a dict (current API) or keywords (the older API).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tandem.train import session as train_session
from tandem.train.api.checkpoint import Checkpoint


def report(metrics: Mapping[str, object] | None = None, *, checkpoint: Checkpoint | None = None,
           **kwargs: object) -> None:
    """Reports a trial's metrics: ``tune.report({"loss": 0.1})`` or ``tune.report(loss=0.1)``.

    Raises:
        TypeError: both a dict and keywords were given.
    """
    if metrics is not None and kwargs:
        raise TypeError(
            "tune.report() takes either a dict (tune.report({'loss': 0.1})) or keywords "
            "(tune.report(loss=0.1)), not both."
        )
    train_session.report(kwargs if metrics is None else metrics, checkpoint)


def get_checkpoint() -> Checkpoint | None:
    """The checkpoint this trial resumes from (after a restart, PBT exploit or restore)."""
    return train_session.get_checkpoint()


@dataclass(frozen=True)
class TuneContext:
    """Returned by ``tune.get_context()``; ids are None outside a trial."""

    trial_id: str | None = None
    trial_name: str | None = None
    trial_dir: str | None = None
    experiment_name: str | None = None
    trial_resources: Any = None

    def get_trial_id(self) -> str | None:
        return self.trial_id

    def get_trial_name(self) -> str | None:
        return self.trial_name

    def get_trial_dir(self) -> str | None:
        return self.trial_dir

    def get_experiment_name(self) -> str | None:
        return self.experiment_name

    def get_trial_resources(self) -> Any:
        return self.trial_resources

    # the train context's getters (a trial is a train run of its own)
    def get_world_size(self) -> int:
        return train_session.get_context().get_world_size()

    def get_world_rank(self) -> int:
        return train_session.get_context().get_world_rank()

    def get_local_rank(self) -> int:
        return train_session.get_context().get_local_rank()

    def get_local_world_size(self) -> int:
        return train_session.get_context().get_local_world_size()

    def get_node_rank(self) -> int:
        return train_session.get_context().get_node_rank()

    def get_storage(self) -> Any:
        return train_session.get_context().get_storage()

    def get_metadata(self) -> dict[str, Any]:
        getter = getattr(train_session.get_context(), "get_metadata", None)
        return dict(getter()) if getter is not None else {}


def get_context() -> TuneContext:
    ctx = train_session.get_context()
    if ctx.trial_id is None:
        return TuneContext()
    storage = ctx.get_storage()
    return TuneContext(
        trial_id=ctx.trial_id,
        trial_name=ctx.trial_name,
        trial_dir=ctx.trial_dir,
        experiment_name=storage.experiment_name if storage else None,
        trial_resources=_trial_resources(ctx),
    )


def _trial_resources(ctx: object) -> object:
    """The trial's resources as a ``PlacementGroupFactory`` (what its worker holds)."""
    from tandem.train.context import TRIAL_RESOURCES
    from tandem.tune.execution.placement_groups import PlacementGroupFactory

    state = (getattr(ctx, "metadata", None) or {}).get(TRIAL_RESOURCES)
    if not state:
        return None
    return PlacementGroupFactory(state["bundles"], state.get("strategy", "PACK"))


def is_session_enabled() -> bool:
    """True inside a tuning trial."""
    return train_session.get_context().trial_id is not None
