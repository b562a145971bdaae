"""What a served model's job reports (``model.serve`` waits on it, ``ServeHandle.status()``
shows the latest) is one moment of its replicas, in order, and a replica counts as ready
only once the HTTP route answers:

* a report that counts a replica ready lists its pid, and the last report is never an older
  view than one before it (a report from the job's thread, taken before the loop saw the
  replica ready and published after, used to end the list: ``status()`` then said 0 ready
  and no pids, and ``test_serve_warm`` failed on ``status()["pids"]`` once in 10 runs);
* a warm replica that is ready before ``run`` routed the prefix is not reported ready
  before the route is there (``serve`` returned before its route answered);
* a request sent once the replica is reported ready is answered, also when the replica
  was ready before the cluster's ``start_workers`` returned (the front attached the worker
  after its ready frame then, which marked it not ready again while the report said ready:
  every request waited until request_timeout_s, and ``benchmarks/serve_again.py``'s client
  saw no answer for 120 s; docs/benchmarks.md, "A warm host").

The runner's ``run`` is real (its front, the shared HTTP server on a real socket); the
cluster and the job's context are fakes that deliver the replica's frames at the moments
that used to lose, so the ordering is forced, not left to luck.
"""

from __future__ import annotations

import asyncio
import threading
import types
from typing import Any

from tandem.jobs.spec import JobStatus
from tandem.model.serve import ServeSettings
from tandem.model.serve._runner import ServeRunner
from tandem.model.serve._shared import front

READY = ("ready", {"pid": 4242, "item_shape": None, "device": "cpu", "reused": True})


class _Worker:
    """A replica that answers each batch at once with its inputs doubled (through the sink,
    as the cluster's I/O thread delivers a real replica's frames)."""

    exitcode = 0  # (the runner's shutdown waits for a real worker's exit)

    def __init__(self) -> None:
        self.sink: Any = None

    def send(self, msg: Any) -> None:
        if msg[0] == "batch" and self.sink is not None:
            _, bid, requests, *_ = msg
            self.sink(self, ("out", bid, [("ok", [2 * x for x in inputs])
                                          for inputs in requests]))

    def kill(self) -> None: ...


def _flush_loop() -> None:
    """Returns once the front's loop ran every callback queued before this call."""
    asyncio.run_coroutine_threadsafe(asyncio.sleep(0), front().loop).result(timeout=30)


class _Cluster:
    def __init__(self, ready_at_start: bool) -> None:
        self.worker = _Worker()
        self.sink: Any = None
        self.ready_at_start = ready_at_start

    def start_workers(self, placement, specs, tasks, sink):
        self.sink = self.worker.sink = sink
        if self.ready_at_start:  # a warm replica with its model kept: ready at once, and
            sink(self.worker, READY)  # the loop has seen it before this call returns
            _flush_loop()
        return [self.worker]


class _Ctx:
    """The job's context; ``on_publish(rows, on_loop)`` runs before each report is kept;
    ``loop_kept`` is set once a report published on the front's loop was kept."""

    def __init__(self, cluster: _Cluster, on_publish: Any = None) -> None:
        self.job_id = "job_test"
        self.cluster = cluster
        self.placement = types.SimpleNamespace(bundles=[{"CPU": 1}])
        self.stop_event = threading.Event()
        self.rows: list[dict] = []
        self.changed = threading.Condition()
        self.on_publish = on_publish
        self.loop_kept = threading.Event()

    def set_log_paths(self, paths: object) -> None: ...

    def set_status(self, status: JobStatus, reason: str | None = None) -> None: ...

    def publish(self, rows: list[dict]) -> None:
        on_loop = threading.current_thread().name == "tandem-serve-loop"
        if self.on_publish is not None:
            self.on_publish(rows, on_loop)
        with self.changed:
            self.rows.extend(rows)
            self.changed.notify_all()
        if on_loop:
            self.loop_kept.set()

    def wait_for(self, pred: Any, timeout: float = 30) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: pred(self.rows), timeout), self.rows


def _run(runner: ServeRunner, ctx: _Ctx) -> tuple[threading.Thread, list]:
    outcome: list = []
    t = threading.Thread(target=lambda: outcome.append(runner.run(ctx)),  # type: ignore[arg-type]
                         name="test-serve-job")
    t.start()
    return t, outcome


def _stop(runner: ServeRunner, t: threading.Thread, outcome: list) -> None:
    runner.stop()
    t.join(timeout=30)
    assert not t.is_alive()
    assert outcome[0].status is JobStatus.STOPPED


def _ready_with_pid(rows: list[dict]) -> bool:
    return any(r["replicas_ready"] == 1 for r in rows)


def test_the_last_report_is_the_replicas_latest_state_with_their_pids(tmp_path):
    """The replica turns ready between the job's first report being taken and it being
    kept (forced: the context delivers the ready frame inside the first ``publish`` and,
    when that call is on another thread than the loop, lets the loop publish first)."""
    runner = ServeRunner("m", 1, {}, str(tmp_path), ServeSettings.of({"route_prefix": "/p"}))
    cluster = _Cluster(ready_at_start=False)
    first = [True]

    def on_publish(rows: list[dict], on_loop: bool) -> None:
        if first[0]:
            first[0] = False
            cluster.sink(cluster.worker, READY)
            if not on_loop:
                assert ctx.loop_kept.wait(30)

    ctx = _Ctx(cluster, on_publish)
    t, outcome = _run(runner, ctx)
    try:
        ctx.wait_for(_ready_with_pid)
        _flush_loop()
    finally:
        _stop(runner, t, outcome)
    last = ctx.rows[-1]
    assert last["replicas_ready"] == 1 and last["pids"] == {0: 4242}, ctx.rows
    for row in ctx.rows:  # a replica counted ready always comes with its pid
        assert len(row["pids"]) >= row["replicas_ready"], ctx.rows


def test_a_replica_ready_before_the_route_is_reported_ready_once_the_route_answers(tmp_path):
    runner = ServeRunner("m", 1, {}, str(tmp_path), ServeSettings.of({"route_prefix": "/q"}))
    cluster = _Cluster(ready_at_start=True)
    routed_when_ready: list[bool] = []

    def on_publish(rows: list[dict], on_loop: bool) -> None:
        listener = runner._listener
        for row in rows:
            if row["replicas_ready"] >= 1:
                routed_when_ready.append(listener is not None
                                         and listener.routes.get("/q") is not None)

    ctx = _Ctx(cluster, on_publish)
    t, outcome = _run(runner, ctx)
    try:
        ctx.wait_for(_ready_with_pid)
    finally:
        _stop(runner, t, outcome)
    assert routed_when_ready and all(routed_when_ready), routed_when_ready
    assert ctx.rows[-1]["replicas_ready"] == 1 and ctx.rows[-1]["pids"] == {0: 4242}


def test_a_request_is_answered_when_the_replica_was_ready_before_start_workers_returned(
        tmp_path):
    import httpx

    settings = ServeSettings.of({"route_prefix": "/r", "request_timeout_s": 10})
    runner = ServeRunner("m", 1, {}, str(tmp_path), settings)
    ctx = _Ctx(_Cluster(ready_at_start=True))
    t, outcome = _run(runner, ctx)
    try:
        ctx.wait_for(_ready_with_pid)  # what model.serve waits for
        r = httpx.post(f"{runner.url}/predict", json={"inputs": [1, 2.5]}, timeout=20)
        assert (r.status_code, r.json()) == (200, {"outputs": [2, 5.0]})
    finally:
        _stop(runner, t, outcome)


class _BrokenWorker(_Worker):
    def send(self, msg: Any) -> None:
        if msg[0] == "batch":
            raise RuntimeError("the connection's send failed")


def test_a_front_that_can_no_longer_dispatch_fails_the_job_and_answers_its_requests(
        tmp_path):
    """Anything that ends the front's dispatcher (here a worker whose send raises) fails the
    served job with the reason, and the request it held is answered, not left waiting."""
    import httpx

    settings = ServeSettings.of({"route_prefix": "/b", "request_timeout_s": 60})
    runner = ServeRunner("m", 1, {}, str(tmp_path), settings)
    cluster = _Cluster(ready_at_start=True)
    cluster.worker = _BrokenWorker()
    ctx = _Ctx(cluster)
    t, outcome = _run(runner, ctx)
    try:
        ctx.wait_for(_ready_with_pid)
        r = httpx.post(f"{runner.url}/predict", json={"inputs": [1]}, timeout=30)
        assert r.status_code == 503 and "being stopped" in r.json()["detail"]
        t.join(timeout=30)
        assert outcome and outcome[0].status is JobStatus.FAILED
        assert "request dispatcher stopped: RuntimeError: the connection's send failed" in \
            str(outcome[0].error)
    finally:
        runner.stop()
        t.join(timeout=30)
