"""The server's projection of typed job events: store ops and stream items as before (the
SSE wire keeps ``(kind, payload)``), without a server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

pytest.importorskip("fastapi")

from tandem.jobs.events import Asked, Checkpointed, RankReported, Reported, StatusChanged
from tandem.jobs.spec import JobCall, JobStatus
from tandem.server.events import EventHub
from tandem.server.projection import EventProjection
from tandem.train.api.checkpoint import Checkpoint


class Writer:
    def __init__(self) -> None:
        self.ops: list[tuple] = []

    def put(self, op: tuple) -> None:
        self.ops.append(op)


def test_typed_events_become_the_same_store_ops_and_stream_items():
    async def main() -> None:
        hub, writer = EventHub(), Writer()
        projection = EventProjection(writer, hub, forget=lambda job_id: None)  # type: ignore[arg-type]
        job = SimpleNamespace(job_id="j", status_reason="placed", log_paths={0: "/l/0.log"})
        projection.track("j", {"name": "run"})
        hub.open("j", "PENDING")
        sub, _ = hub.subscribe("j", -1, asyncio.get_running_loop())
        ckpt = Checkpoint("/runs/r/checkpoint_000001")
        answered: list[object] = []
        for event in (StatusChanged(JobStatus.PENDING), StatusChanged(JobStatus.RUNNING),
                      Reported([{"loss": 0.5}]), Checkpointed(1, ckpt, {"loss": 0.5}),
                      RankReported(1, [(1, 0.1, {"loss": 0.4}, None)]),
                      Asked("verdict", JobCall((1, 1), lambda ok, v: answered.append(v)))):
            projection.on_job_event(job, event)  # type: ignore[arg-type]
        kinds = [op[0] for op in writer.ops]
        assert kinds == ["state", "reports", "update", "update"]  # PENDING was recorded at submit
        assert writer.ops[0][2:] == ("RUNNING", writer.ops[0][3], None, None, "placed")
        assert writer.ops[1][2][0].metrics == {"loss": 0.5}
        assert writer.ops[3][2]["result"]["checkpoint_path"] == ckpt.path
        assert writer.ops[3][2]["result"]["checkpoint_iteration"] == 1
        items = [await asyncio.wait_for(sub.queue.get(), 1) for _ in range(4)]
        assert [i.kind for i in items] == ["status", "reports", "event", "event"]
        assert items[2].data == {"job_id": "j", "kind": "checkpoint"}
        assert items[2].payload == (1, ckpt, {"loss": 0.5})  # the payload as it always was
        assert items[3].data["kind"] == "rank_reports"
        assert items[3].payload == (1, [(1, 0.1, {"loss": 0.4}, None)])
        assert answered == []  # a question is the listener's (or the call router's), not ours
        assert sub.queue.empty()

    asyncio.run(main())


def test_the_dashboard_shows_states_and_progress_from_typed_events():
    from tandem.server.dashboard.live import DashboardLive

    subscribers: list = []
    server = SimpleNamespace(
        service=SimpleNamespace(subscribe=subscribers.append, list=lambda: []),
        cluster=SimpleNamespace(resources=lambda: {}, available=lambda: {}),
        hub=SimpleNamespace(num_reports=lambda job_id: 0), sampler=SimpleNamespace(latest={}))
    live = DashboardLive(server, interval_s=3600)
    try:
        assert subscribers == [live._on_job_event]
        job = SimpleNamespace(job_id="j", name="run", spec=SimpleNamespace(metadata={}))
        broadcast: list = []
        live._broadcast = broadcast.append  # type: ignore[method-assign]
        for event in (StatusChanged(JobStatus.RUNNING), Reported([{"loss": 0.5, "epoch": 1}]),
                      Checkpointed(1, Checkpoint("/c"), {}), Reported([])):
            live._on_job_event(job, event)  # type: ignore[arg-type]
        assert [(kind, data["state"]) for kind, data in broadcast] == [("job", "RUNNING")]
        assert live.last_report("j") == {"loss": 0.5, "epoch": 1}
    finally:
        live.close()


def test_a_preempted_job_keeps_its_preemption_count_in_the_lists_once_it_ends():
    """The count is written into the job's stored summary at the preemption and kept at
    its end; ``/api/jobs`` (hence ``tandem jobs list``) and the dashboard's list read it
    from the record, so "preempted 1×" stays after the job finished."""
    from tandem.cli import _state_shown
    from tandem.jobs.store import JobRecord
    from tandem.server.dashboard.routes import _why
    from tandem.server.routes.common import _job_out
    from tandem.server.vocabulary import stored_preemptions

    hub, writer = EventHub(), Writer()
    projection = EventProjection(writer, hub, forget=lambda job_id: None)  # type: ignore[arg-type]
    job = SimpleNamespace(job_id="j", status_reason=None, log_paths={}, num_preemptions=0,
                          outcome=None, started_time=1.0)
    projection.track("j", {"name": "low"})
    hub.open("j", "PENDING")
    projection.on_job_event(job, StatusChanged(JobStatus.RUNNING))  # type: ignore[arg-type]
    job.num_preemptions = 1  # the scheduler asked it to yield
    for status in (JobStatus.RESTARTING, JobStatus.RUNNING, JobStatus.FINISHED):
        projection.on_job_event(job, StatusChanged(status))  # type: ignore[arg-type]
    results = [op[2]["result"] for op in writer.ops if op[0] == "update"]
    assert [r.get("preemptions") for r in results] == [1, 1]  # at the preemption, at the end

    rec = JobRecord("j", "low", "FINISHED", 0.0, result=results[-1])
    assert stored_preemptions(rec) == 1
    listed = _job_out(rec)
    assert listed["preemptions"] == 1 and listed["state"] == "FINISHED"
    assert _state_shown(listed) == "FINISHED (preempted 1×)"
    gone = SimpleNamespace(service=SimpleNamespace(get=lambda job_id: 1 / 0))
    assert _why(gone, "j", "FINISHED", stored_preemptions(rec)) == {"preemptions": 1}
    never = JobRecord("k", "other", "FINISHED", 0.0, result={"preemptions": True})
    assert stored_preemptions(never) == 0 and _state_shown(_job_out(never)) == "FINISHED"
