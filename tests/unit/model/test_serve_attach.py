"""A warm replica (its model kept from the last deployment) can answer "ready" before the
cluster's ``start_workers`` returns: the front then knows its worker first, keeps it ready
and publishes its pid (a late attach used to mark it not ready again)."""

from __future__ import annotations

import asyncio
import types

from tandem.model.serve import ServeSettings
from tandem.model.serve._runner import ServeRunner
from tandem.model.serve._shared import front


class _Worker:
    exitcode = None

    def send(self, msg: object) -> None: ...

    def kill(self) -> None: ...


class _AnswersAtOnce:
    """A cluster whose worker's frames arrive before ``start_workers`` returns (isolates
    the runner's ordering; the real race needs a warm process and luck)."""

    def __init__(self) -> None:
        self.worker = _Worker()

    def start_workers(self, placement, specs, tasks, sink):
        sink(self.worker, ("hello",))
        sink(self.worker, ("ready", {"pid": 4242, "item_shape": None, "device": "cpu",
                                     "reused": True}))
        return [self.worker]


def test_a_replica_ready_before_start_workers_returns_stays_ready(tmp_path):
    runner = ServeRunner("m", 1, {}, str(tmp_path), ServeSettings.of({"route_prefix": "/r"}))
    loop = front().loop
    runner._loop = loop
    runner._log_dir = str(tmp_path)
    runner._front = asyncio.run_coroutine_threadsafe(runner._make_front(), loop).result()
    published: list[dict] = []
    cluster = _AnswersAtOnce()
    runner._ctx = types.SimpleNamespace(job_id="j", cluster=cluster,
                                        placement=types.SimpleNamespace(bundles=[{"CPU": 1}]),
                                        publish=published.extend)
    try:
        runner._start_replica(0)
        # the loop runs callbacks in order: once this one ran, the frames' had too
        asyncio.run_coroutine_threadsafe(asyncio.sleep(0), loop).result(timeout=30)
        rep = runner._front.replicas[0]
        assert rep.ready and rep.worker is cluster.worker and rep.warm
        assert runner._front.ready_count() == 1
        # its pid is published; it counts as ready once run() routed the prefix, which
        # this test does not reach (test_serve_reports.py)
        assert published[-1]["pids"] == {0: 4242} and published[-1]["replicas_ready"] == 0
    finally:
        loop.call_soon_threadsafe(runner._front.close)
