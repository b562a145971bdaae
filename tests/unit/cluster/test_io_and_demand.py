"""The driver's I/O thread base shared by the local and Ray clusters, and the autoscaler
demand of waiting gangs on Ray (no Ray needed: its request call is scripted)."""

from __future__ import annotations

import queue
import socket
import sys
import types

from tandem.cluster import _wire
from tandem.cluster.ray._autoscaler import AutoscalerDemand


class EchoIO(_wire.IOThread):
    """Delivers every frame of every connection to a queue; answers nothing."""

    def __init__(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        super().__init__("test-io", listener)
        self.address = listener.getsockname()
        self.frames: queue.SimpleQueue = queue.SimpleQueue()
        self.rounds = 0
        self.stopped = False

    def _read_conn(self, conn, state) -> None:
        data = _wire.recv_some(conn)
        if data is None:
            return
        if not data:
            self._sel.unregister(conn)
            conn.close()
            self.frames.put("EOF")
            return
        for frame in state[0].feed(data):
            self.frames.put(frame)

    def _after_select(self) -> None:
        self.rounds += 1

    def _on_stop(self) -> None:
        self.stopped = True


def test_io_thread_reads_frames_in_order_then_stops_when_woken():
    io = EchoIO()
    io.start()
    try:
        with socket.create_connection(io.address) as c:
            _wire.authenticate_client(c, io.authkey)
            c.sendall(_wire.encode(("hello", 1)) + _wire.encode(("reports", [1, 2])))
            assert io.frames.get(timeout=5) == ("hello", 1)
            assert io.frames.get(timeout=5) == ("reports", [1, 2])
        assert io.frames.get(timeout=5) == "EOF"
    finally:
        io._stopping = True
        io.wake()
        io.join(timeout=5)
    assert not io.is_alive() and not io.alive and io.stopped and io.rounds >= 1


def _scripted_ray(monkeypatch) -> list:
    sent: list = []
    fake = types.ModuleType("ray.autoscaler.sdk")
    fake.request_resources = lambda bundles: sent.append(list(bundles))  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ray.autoscaler.sdk", fake)
    return sent


def test_demand_is_sent_once_per_change_and_withdrawn_when_placed(monkeypatch):
    sent = _scripted_ray(monkeypatch)
    demand = AutoscalerDemand(poll_interval_s=0.5)
    demand.want("job1", [{"CPU": 2.0}, {"CPU": 2.0}])
    demand.want("job1", [{"CPU": 2.0}, {"CPU": 2.0}])  # asked again while waiting: no resend
    demand.want("job2", [{"GPU": 1.0}])
    assert sent == [[{"CPU": 2.0}, {"CPU": 2.0}], [{"CPU": 2.0}, {"CPU": 2.0}, {"GPU": 1.0}]]
    demand.placed("job1")
    assert sent[-1] == [{"GPU": 1.0}] and demand.sent == [{"GPU": 1.0}]
    demand.placed("job1")  # already withdrawn: nothing sent
    assert len(sent) == 3
    demand.withdraw_all()
    assert sent[-1] == [] and demand.sent == []


def test_demand_of_a_job_that_stopped_asking_expires(monkeypatch):
    sent = _scripted_ray(monkeypatch)
    demand = AutoscalerDemand(poll_interval_s=0.5)
    now = [1000.0]
    monkeypatch.setattr("tandem.cluster.ray._autoscaler.time.monotonic", lambda: now[0])
    demand.want("cancelled", [{"CPU": 1.0}])
    now[0] += AutoscalerDemand.TTL_S + 0.1  # it has not asked since
    demand.send()
    assert sent == [[{"CPU": 1.0}], []]
