"""The 1.x worker functions: ``save_checkpoint``, ``load_checkpoint``, ``world_rank`` & co.

They run inside a training worker and map onto the current session: a checkpoint is a
report that carries a checkpoint directory and no metrics row (see ``CHECKPOINT_ONLY``).
``train.report(**metrics)`` itself is ``tandem.train.report``, which takes both spellings.
"""

from __future__ import annotations

import math
from typing import Any

from tandem._core.errors import TandemError
from tandem.train import session as session_mod
from tandem.train._internal.worker import CHECKPOINT_ONLY
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.legacy import _checkpoint


def save_checkpoint(**kwargs: Any) -> None:
    """Saves ``kwargs`` as this run's checkpoint (1.x API).

    Call it on every worker, the same number of times (as with ``report``); rank 0's dict is
    kept. ``train.load_checkpoint()`` returns it after a restart, and
    ``Trainer.latest_checkpoint`` after the run. The numeric values in ``kwargs`` are what a
    ``CheckpointStrategy(checkpoint_score_attribute=...)`` ranks checkpoints by.
    """
    session = session_mod._require("save_checkpoint")
    scores = {CHECKPOINT_ONLY: True}
    for key, value in kwargs.items():
        numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
        if numeric and not (isinstance(value, float) and math.isnan(value)):
            scores[key] = value
    if session.context.world_rank != 0:
        session.report(scores, None)
        return
    directory = _checkpoint.new_local_dir()
    try:
        _checkpoint.write_dict(dict(kwargs), directory)
        session.report(scores, Checkpoint(directory))
    finally:
        if session.context.storage is not None:  # the report copied it into the run folder
            _checkpoint.remove_local_dir(directory)


def load_checkpoint() -> dict[str, Any] | None:
    """The checkpoint dict to resume from (after a restart, or ``Trainer.run(checkpoint=...)``),
    or None (1.x API).

    Raises:
        TandemError: the checkpoint to resume from was not written by ``save_checkpoint``
            (read it with ``train.get_checkpoint()`` instead).
    """
    checkpoint = session_mod.get_checkpoint()
    if checkpoint is None:
        return None
    state = _checkpoint.read_dict(checkpoint)
    if state is None:
        raise TandemError(
            f"train.load_checkpoint(): the checkpoint to resume from ({checkpoint.path}) was "
            f"not written by train.save_checkpoint(), so it holds no dict. Read its files with "
            f"train.get_checkpoint().as_directory()."
        )
    return state


def world_rank() -> int:
    """This worker's rank among all workers (1.x API; ``get_context().get_world_rank()``)."""
    return session_mod.get_context().world_rank


def local_rank() -> int:
    """This worker's rank on its node (1.x API; ``get_context().get_local_rank()``)."""
    return session_mod.get_context().local_rank


def world_size() -> int:
    """The number of workers (1.x API; ``get_context().get_world_size()``)."""
    return session_mod.get_context().world_size
