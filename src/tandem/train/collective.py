"""``ray.train.collective``: ``barrier()`` and ``broadcast_from_rank_zero(data)`` across the
workers of a run, through the run's controller (no process group needed, so they work with
every backend)."""

from __future__ import annotations

import itertools
from typing import Any

from tandem.train import session as session_mod

__all__ = ["barrier", "broadcast_from_rank_zero"]

_calls = itertools.count(1)


def _gather(value: object) -> list[object]:
    session = session_mod._require("collective")
    ctx = session.context
    key = ("collective", next(_calls))
    return list(session.call("rendezvous_gather", (key, ctx.world_rank, value)))


def barrier() -> None:
    """Blocks until every worker of the run has called ``barrier()`` (each worker must
    call the collectives in the same order)."""
    _gather(None)


def broadcast_from_rank_zero(data: object) -> Any:
    """Returns rank 0's ``data`` on every worker (it must pickle); the others' ``data`` is
    ignored."""
    ctx = session_mod._require("broadcast_from_rank_zero").context
    return _gather(data if ctx.world_rank == 0 else None)[0]
