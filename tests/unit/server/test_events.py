"""The server's event hub and store writer, and the token middleware, without a server."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("fastapi")

from tandem.jobs.store import InMemoryJobStore, JobRecord, ReportRecord
from tandem.server.auth import TokenAuth
from tandem.server.events import EventHub, StoreWriter


def test_hub_backlog_then_live_then_end():
    async def main():
        hub = EventHub()
        loop = asyncio.get_running_loop()
        assert hub.subscribe("j", -1, loop) is None
        hub.open("j", "PENDING", next_seq=10)
        assert hub.reports("j", [{"i": 0}, {"i": 1}]) == 10
        sub, backlog = hub.subscribe("j", 10, loop)
        assert [b.kind for b in backlog] == ["status", "reports"]
        assert backlog[1].data["first_seq"] == 11 and backlog[1].data["rows"] == [{"i": 1}]
        hub.status("j", "RUNNING", 1.0)
        assert hub.reports("j", [{"i": 2}]) == 12
        hub.event("j", "checkpoint", ("x",))
        hub.end("j", "FINISHED", None)
        got = [await asyncio.wait_for(sub.queue.get(), 1) for _ in range(4)]
        assert [g.kind for g in got] == ["status", "reports", "event", "end"]
        late, backlog = hub.subscribe("j", -1, loop)
        assert [b.kind for b in backlog] == ["status", "reports", "end"]
        hub.drop("j")
        assert hub.subscribe("j", -1, loop) is None

    asyncio.run(main())


def test_writer_batches_in_order_and_flushes():
    store = InMemoryJobStore()
    store.create_job(JobRecord("j", "n", "PENDING", time.time()))
    w = StoreWriter(store)
    for i in range(100):
        w.put(("reports", "j", [ReportRecord("j", i, {"i": i}, 0.0)]))
    w.put(("state", "j", "RUNNING", 1.0, None, None, None))
    w.put(("update", "j", {"result": {"ok": True}}))
    w.put(("state", "j", "FAILED", 2.0, "boom", "tb", None))
    assert w.flush(10)
    rec = store.get_job("j")
    assert rec.state == "FAILED" and rec.error == "boom" and rec.traceback == "tb"
    assert rec.result == {"ok": True}
    assert len(store.get_reports("j")) == 100
    w.put(("state", "missing", "RUNNING", 1.0, None, None, None))  # logged, never fatal
    assert w.flush(10)
    w.close()
    w.put(("state", "j", "RUNNING", 3.0, None, None, None))  # dropped after close
    assert store.get_job("j").state == "FAILED"


def test_token_middleware_refuses_before_the_app_runs():
    calls = []

    async def app(scope, receive, send):
        calls.append(scope["path"])

    auth = TokenAuth(app, "tok")
    sent = []

    async def send(msg):
        sent.append(msg)

    def scope(path="/api/jobs", method="GET", headers=(), qs=b""):
        return {"type": "http", "path": path, "method": method, "headers": list(headers),
                "query_string": qs}

    async def run(s):
        sent.clear()
        await auth(s, None, send)
        return sent[0]["status"] if sent else 200

    assert asyncio.run(run(scope())) == 401
    assert asyncio.run(run(scope(headers=[(b"authorization", b"Bearer nope")]))) == 401
    assert asyncio.run(run(scope(headers=[(b"authorization", b"Bearer tok")]))) == 200
    assert asyncio.run(run(scope(path="/", qs=b"token=tok"))) == 200
    assert asyncio.run(run(scope(path="/api/jobs", qs=b"token=tok"))) == 401
    assert asyncio.run(run(scope(headers=[(b"cookie", b"tandem_token=tok")]))) == 200
    assert asyncio.run(run(scope(method="POST", headers=[(b"cookie", b"tandem_token=tok")]))) == 401
    assert calls == ["/api/jobs", "/", "/api/jobs"]
