"""The server's event hub and store writer, and the token middleware, without a server."""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("fastapi")

from tandem.jobs.spec import JobCall
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


def _call(answers: list, payload=(1, 1)) -> JobCall:
    return JobCall(payload, lambda ok, value: answers.append((ok, value)), "continue")


def _wait_for(cond, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_hub_calls_reach_the_answering_stream_and_its_answer_the_job():
    """A job's question goes to the submitter's stream only (calls=true), again to one
    that opens later (a reconnection) until answered; a second answer is refused."""
    async def main():
        hub = EventHub()
        loop = asyncio.get_running_loop()
        hub.open("j", "RUNNING")
        reader, _ = hub.subscribe("j", -1, loop)  # someone reading results: no questions
        answers: list = []
        assert hub.call("j", "verdict", _call(answers, (3, 3)))
        first, backlog = hub.subscribe("j", -1, loop, answers_calls=True)
        calls = [b for b in backlog if b.kind == "call"]
        assert len(calls) == 1 and calls[0].payload == (3, 3)
        assert calls[0].data["kind"] == "verdict"
        hub.unsubscribe("j", first)  # the client reconnects: the question is sent again
        again, backlog = hub.subscribe("j", -1, loop, answers_calls=True)
        cid = next(b for b in backlog if b.kind == "call").data["call_id"]
        assert cid == calls[0].data["call_id"]
        assert hub.call("j", "verdict", _call(answers, (4, 4)))
        live = await asyncio.wait_for(again.queue.get(), 1)
        assert live.kind == "call" and live.payload == (4, 4)
        assert reader.queue.empty()
        assert hub.answer("j", cid, True, "stop")
        assert not hub.answer("j", cid, True, "stop")  # answered already
        assert hub.answer("j", live.data["call_id"], False, "boom")
        assert answers[0] == (True, "stop")
        assert answers[1][0] is False and "boom" in str(answers[1][1])
        assert not hub.answer("other", 1, True, "x")

    asyncio.run(main())


def test_hub_questions_nobody_answers_get_their_default():
    """The client is gone: after ``unattended_s`` its questions get the default answer,
    and later ones at once, until a client follows the job again."""
    async def main():
        hub = EventHub(unattended_s=0.2)
        loop = asyncio.get_running_loop()
        hub.open("j", "RUNNING")
        answers: list = []
        hub.call("j", "verdict", _call(answers))
        await asyncio.sleep(0.05)
        assert answers == []  # the submitter may still connect
        _wait_for(lambda: answers == [(True, "continue")])
        hub.call("j", "verdict", _call(answers))
        assert answers[-1] == (True, "continue") and len(answers) == 2  # at once
        sub, _ = hub.subscribe("j", -1, loop, answers_calls=True)
        hub.call("j", "verdict", _call(answers))
        assert len(answers) == 2  # followed again: it waits for the client
        got = await asyncio.wait_for(sub.queue.get(), 1)
        hub.unsubscribe("j", sub)
        _wait_for(lambda: len(answers) == 3)
        assert not hub.answer("j", got.data["call_id"], True, "stop")
        hub.call("j", "verdict", _call(answers))
        assert len(answers) == 4  # unattended again: at once
        sub, _ = hub.subscribe("j", -1, loop, answers_calls=True)
        hub.call("j", "verdict", _call(answers))
        hub.end("j", "FINISHED", None)  # the job ended: its question needs no answer
        hub.unsubscribe("j", sub)
        await asyncio.sleep(0.4)
        assert len(answers) == 4

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
