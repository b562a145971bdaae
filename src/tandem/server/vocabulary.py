"""One vocabulary of states: the words the server shows a job or a trial with.

A job is named with the job service's states (``PENDING``, ``RUNNING``, ``RESTARTING``,
``FINISHED``, ``FAILED``, ``STOPPED``). A job that runs a Tune trial is named with Ray
Tune's trial words wherever it is shown (``tandem jobs list``, ``/api/jobs``, the
dashboard's experiments view), so that a trial reads the same everywhere: it ended
``TERMINATED`` (it finished, or the tuner stopped it: a scheduler at ``max_t``, a stopper,
the experiment's end) or ``ERROR`` (it failed). ``PENDING``, ``RUNNING`` and ``RESTARTING``
are the same words in both.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tandem.jobs.store import JobRecord

__all__ = ["TRIAL_END_WORDS", "shown_job_state", "stored_preemptions"]

#: how a trial's job ended, in Ray Tune's trial words
TRIAL_END_WORDS = {"FINISHED": "TERMINATED", "STOPPED": "TERMINATED", "FAILED": "ERROR"}


def shown_job_state(state: str, metadata: Mapping[str, object] | None) -> str:
    """The word ``state`` is shown with for a job whose spec metadata is ``metadata``: the
    trial's word for a Tune trial's job (its metadata names a ``trial_id``), else itself."""
    if metadata and metadata.get("trial_id"):
        return TRIAL_END_WORDS.get(state, state)
    return state


def stored_preemptions(rec: JobRecord) -> int:
    """How many times a job was preempted, as its stored summary says (the server writes
    it at each preemption and keeps it once the job ends): what the job lists show as
    "preempted N×" whether the job still runs or not."""
    n = (rec.result or {}).get("preemptions")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0
