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
