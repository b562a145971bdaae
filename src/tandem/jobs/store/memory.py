"""``InMemoryJobStore``: a dict-based job store for the embedded job service."""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from tandem.jobs.store.base import (
    RUNNING_STATE,
    TERMINAL_STATES,
    DuplicateJobError,
    DuplicateReportError,
    JobRecord,
    JobStore,
    Order,
    ReportRecord,
    TransitionRecord,
    UsageSample,
    check_json_dict,
    check_list_args,
    check_state_args,
    check_update_fields,
    job_not_found,
    normalize_json,
    states_filter,
)

__all__ = ["InMemoryJobStore"]


class _Reports:
    """Reports of one job, kept sorted by ``seq``."""

    __slots__ = ("records", "seqs")

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.records: list[ReportRecord] = []


class InMemoryJobStore(JobStore):
    """A ``JobStore`` in this process's memory; nothing survives the process.

    Thread safety: one lock guards every call, so calls are atomic and may come from any
    thread. Not shared between processes. Stored dicts are JSON-normalised copies (see
    ``JobStore``), so this store behaves like ``SQLJobStore`` for the same calls.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, JobRecord] = {}
        self._transitions: dict[str, list[TransitionRecord]] = {}
        self._reports: dict[str, _Reports] = {}
        self._usage: dict[str, list[UsageSample]] = {}

    def __repr__(self) -> str:
        return "InMemoryJobStore()"

    # ----------------------------------------------------------------- jobs

    def create_job(self, record: JobRecord) -> None:
        check_json_dict(record.spec_json, "JobRecord.spec_json")
        check_json_dict(record.result, "JobRecord.result", allow_none=True)
        stored = dataclasses.replace(
            record,
            spec_json=normalize_json(record.spec_json),
            result=normalize_json(record.result),
        )
        with self._lock:
            if record.job_id in self._jobs:
                raise DuplicateJobError(
                    f"a job with id {record.job_id!r} already exists in {self!r}; "
                    f"give each job a fresh id (tandem._core.ids.new_id('job_'))"
                )
            self._jobs[record.job_id] = stored
            self._transitions[record.job_id] = [
                TransitionRecord(record.job_id, None, record.state, record.submitted_at)
            ]
            self._reports[record.job_id] = _Reports()
            self._usage[record.job_id] = []

    def update_job(self, job_id: str, **fields: object) -> None:
        changes = check_update_fields(job_id, fields)
        for key in ("spec_json", "result"):
            if key in changes:
                changes[key] = normalize_json(changes[key])
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise job_not_found(job_id, self)
            self._jobs[job_id] = dataclasses.replace(job, **changes)

    def set_state(
        self,
        job_id: str,
        state: str,
        at: float,
        error: str | None = None,
        *,
        traceback: str | None = None,
        reason: str | None = None,
    ) -> JobRecord:
        check_state_args(state, at)
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise job_not_found(job_id, self)
            changes: dict[str, Any] = {"state": state}
            if state == RUNNING_STATE and job.started_at is None:
                changes["started_at"] = at
            if state in TERMINAL_STATES and job.ended_at is None:
                changes["ended_at"] = at
            if error is not None:
                changes["error"] = error
            if traceback is not None:
                changes["traceback"] = traceback
            new = dataclasses.replace(job, **changes)
            self._jobs[job_id] = new
            self._transitions[job_id].append(
                TransitionRecord(
                    job_id, job.state, state, at, reason if reason is not None else error
                )
            )
        return dataclasses.replace(new, spec=None)

    def get_job(self, job_id: str) -> JobRecord | None:
        with self._lock:
            return self._jobs.get(job_id)

    def list_jobs(
        self,
        states: str | Iterable[str] | None = None,
        name: str | None = None,
        tag: str | None = None,
        limit: int = 100,
        offset: int = 0,
        order: Order = "desc",
    ) -> list[JobRecord]:
        check_list_args(limit, offset, order)
        wanted = states_filter(states)
        with self._lock:
            jobs = list(self._jobs.values())
        if wanted is not None:
            jobs = [j for j in jobs if j.state in wanted]
        if name is not None:
            jobs = [j for j in jobs if j.name == name]
        if tag is not None:
            jobs = [j for j in jobs if tag in j.tags]
        jobs.sort(key=lambda j: (j.submitted_at, j.job_id), reverse=(order == "desc"))
        return [dataclasses.replace(j, spec=None) for j in jobs[offset : offset + limit]]

    # ----------------------------------------------------------------- reports

    def append_reports(self, job_id: str, reports: Sequence[ReportRecord]) -> None:
        if not reports:
            with self._lock:
                if job_id not in self._jobs:
                    raise job_not_found(job_id, self)
            return
        prepared = []
        for r in reports:
            if r.job_id != job_id:
                raise ValueError(
                    f"append_reports({job_id!r}, ...) got a report of job {r.job_id!r} "
                    f"(seq {r.seq}); append each job's reports in its own call"
                )
            check_json_dict(r.metrics, f"ReportRecord.metrics (seq {r.seq})")
            prepared.append(dataclasses.replace(r, metrics=normalize_json(r.metrics)))
        with self._lock:
            if job_id not in self._jobs:
                raise job_not_found(job_id, self)
            box = self._reports[job_id]
            batch_seqs: set[int] = set()
            for r in prepared:
                if r.seq in batch_seqs or _contains(box.seqs, r.seq):
                    raise DuplicateReportError(
                        f"job {job_id!r} already has a report with seq {r.seq}; "
                        f"report seqs must be unique per job (nothing of this batch was stored)"
                    )
                batch_seqs.add(r.seq)
            if _ascending(prepared) and (not box.seqs or prepared[0].seq > box.seqs[-1]):
                box.seqs.extend(r.seq for r in prepared)
                box.records.extend(prepared)
            else:
                for r in prepared:
                    i = bisect.bisect_left(box.seqs, r.seq)
                    box.seqs.insert(i, r.seq)
                    box.records.insert(i, r)

    def get_reports(
        self,
        job_id: str,
        after_seq: int = -1,
        limit: int = 1000,
        *,
        with_checkpoint: bool = False,
    ) -> list[ReportRecord]:
        check_list_args(limit, 0, "asc")
        with self._lock:
            box = self._reports.get(job_id)
            if box is None:
                return []
            start = bisect.bisect_right(box.seqs, after_seq)
            if not with_checkpoint:
                return box.records[start : start + limit]
            out: list[ReportRecord] = []
            for r in box.records[start:]:
                if len(out) >= limit:
                    break
                if r.checkpoint_path is not None:
                    out.append(r)
            return out

    def transitions(self, job_id: str) -> list[TransitionRecord]:
        with self._lock:
            return list(self._transitions.get(job_id, ()))

    # ----------------------------------------------------------------- usage

    def append_usage(self, samples: Sequence[UsageSample]) -> None:
        with self._lock:
            for s in samples:
                if s.job_id not in self._jobs:
                    raise job_not_found(s.job_id, self)
            for s in samples:
                self._usage[s.job_id].append(s)

    def get_usage(
        self,
        job_id: str,
        *,
        rank: int | None = None,
        since: float | None = None,
        limit: int = 10_000,
    ) -> list[UsageSample]:
        check_list_args(limit, 0, "asc")
        with self._lock:
            samples = list(self._usage.get(job_id, ()))
        if rank is not None:
            samples = [s for s in samples if s.rank == rank]
        if since is not None:
            samples = [s for s in samples if s.time > since]
        samples.sort(key=lambda s: (s.time, s.rank))
        return samples[:limit]


def _contains(sorted_list: list[int], value: int) -> bool:
    i = bisect.bisect_left(sorted_list, value)
    return i < len(sorted_list) and sorted_list[i] == value


def _ascending(records: Sequence[ReportRecord]) -> bool:
    return all(a.seq < b.seq for a, b in itertools.pairwise(records))
