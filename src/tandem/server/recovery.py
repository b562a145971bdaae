"""Restart safety: what a server does with the jobs an earlier server left behind.

At start, after taking the store (``ownership.py``) and replaying the journal of events an
earlier server could not write (``writer.replay_journal``), every job still PENDING,
RUNNING or RESTARTING in the store is queued again; running ones resume from the newest
committed checkpoint in their run folder. Finished jobs stay history.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import traceback
from typing import TYPE_CHECKING, Any, Protocol

from tandem.jobs.store import JobRecord, JobStore
from tandem.server.runner_hooks import Requeueable

if TYPE_CHECKING:
    from tandem.jobs.spec import JobSpec
    from tandem.server.packages import PackageStore

__all__ = ["ACTIVE_STATES", "next_seq", "recover"]

logger = logging.getLogger(__name__)


class RecoveringServer(Protocol):
    """What ``recover`` needs of the train server (``tandem.server.core.TrainServer``; a
    Protocol, so that recovery does not import the server that calls it)."""

    @property
    def store(self) -> JobStore: ...

    @property
    def packages(self) -> PackageStore: ...

    def queue(self, job_id: str, spec: JobSpec, working_dir: str | None,
              env_vars: dict[str, str], next_seq: int, summary: dict[str, Any]) -> None: ...

ACTIVE_STATES = ("PENDING", "RUNNING", "RESTARTING")


def _active_records(store: JobStore) -> list[JobRecord]:
    records: list[JobRecord] = []
    offset = 0
    while True:
        page = store.list_jobs(states=ACTIVE_STATES, limit=1000, offset=offset, order="asc")
        records.extend(page)
        if len(page) < 1000:
            return records
        offset += 1000


def next_seq(store: JobStore, job_id: str) -> int:
    """The seq the job's next report gets (one past the last stored)."""
    after = -1
    while True:
        page = store.get_reports(job_id, after_seq=after, limit=10_000)
        if not page:
            return after + 1
        after = page[-1].seq


def recover(server: RecoveringServer) -> list[str]:
    """Re-queues the jobs a previous server left PENDING, RUNNING or RESTARTING; returns
    their ids. A job that cannot be loaded any more is marked FAILED with the reason."""
    from tandem.server.loader import load_spec

    store = server.store
    requeued = []
    for rec in _active_records(store):
        full = store.get_job(rec.job_id)
        if full is None or full.spec is None:
            continue
        now = time.time()
        env = dict((full.spec_json or {}).get("runtime_env") or {})
        env_vars = dict((full.spec_json or {}).get("env_vars") or {})
        try:
            working_dir = server.packages.working_dir(env.get("working_dir"))
            spec = load_spec(full.spec, working_dir)
            spec = dataclasses.replace(spec, priority=full.priority, tags=full.tags,
                                       name=full.name,
                                       owner=(full.spec_json or {}).get("owner") or spec.owner)
        except Exception as e:  # noqa: BLE001
            store.set_state(rec.job_id, "FAILED", now,
                            f"could not re-queue the job after a server restart: {e}",
                            traceback=traceback.format_exc(),
                            reason=f"failed: could not re-queue after a server restart: {e}")
            continue
        summary = dict(full.result or {})
        if rec.state != "PENDING":
            if isinstance(spec.runner, Requeueable):
                spec.runner.on_requeue(summary.get("checkpoint_path"))
            store.set_state(rec.job_id, "PENDING", now,
                            reason=f"re-queued after a server restart (was {rec.state})")
        try:
            server.queue(rec.job_id, spec, working_dir, env_vars,
                         next_seq=next_seq(store, rec.job_id), summary=summary)
        except Exception:
            logger.exception("could not re-queue job %s", rec.job_id)
            continue
        requeued.append(rec.job_id)
    if requeued:
        logger.warning("re-queued %d job(s) after a restart: %s", len(requeued), requeued)
    return requeued
