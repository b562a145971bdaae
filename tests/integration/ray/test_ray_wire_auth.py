"""The Ray driver's worker listener (bound on the node's address) reads nothing before the
peer passed the HMAC handshake with the session key; a real worker actor still connects."""

from __future__ import annotations

import queue
import socket

import cloudpickle
import pytest

from tandem.cluster import _wire
from tandem.cluster.base import WorkerSpec
from tandem.cluster.ray import RayCluster
from tests.unit.cluster.test_wire_auth import Evil, _send_quietly, read_until_closed

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(120), pytest.mark.ray_cluster]


def test_ray_listener_refuses_peers_without_the_key(ray_cluster, tmp_path):
    cluster = RayCluster(address=None)  # the test's Ray connection
    io = cluster._io_thread()
    marks = [tmp_path / "ran_nokey", tmp_path / "ran_wrongkey"]
    try:
        with socket.create_connection(io.address, timeout=30) as s:
            _send_quietly(s, _wire.encode(("hello", "w", 1, Evil(str(marks[0])))))
            got = read_until_closed(s)
        assert b"#CHALLENGE#" in got and b"#WELCOME#" not in got
        with socket.create_connection(io.address, timeout=30) as s:
            with pytest.raises(_wire.AuthenticationError):
                _wire.authenticate_client(s, b"a guessed key", timeout_s=30)
            _send_quietly(s, _wire.encode(("hello", "w", 1, Evil(str(marks[1])))))
            read_until_closed(s)
        assert io.refused == 2 and not any(m.exists() for m in marks)

        # A worker actor gets the key in its call's arguments and connects as before.
        def task(channel):
            channel.send(("hi", 7))
            return 0

        placement = cluster.place([{"CPU": 1.0}])
        assert placement is not None
        frames: queue.SimpleQueue = queue.SimpleQueue()
        spec = WorkerSpec("ray-auth-w0", 0, str(tmp_path / "w0.log"))
        cluster.start_workers(placement, [spec], [cloudpickle.dumps(task)],
                              lambda w, f: frames.put(f))
        got_frames = []
        while not got_frames or got_frames[-1][0] != "__exit__":
            got_frames.append(frames.get(timeout=60))
        assert ("hi", 7) in got_frames and got_frames[-1] == ("__exit__", 0)
        assert io.refused == 2
        cluster.release(placement)
    finally:
        cluster.shutdown()
