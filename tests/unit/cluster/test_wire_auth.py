"""Nothing sent to a worker listener, or by a driver to a worker, is unpickled before the
peer proved it holds the session's key (the HMAC handshake of ``multiprocessing.connection``
in both directions). Each probe sends a pickle whose ``__reduce__`` would create a file."""

from __future__ import annotations

import os
import queue
import socket
import threading

import cloudpickle
import pytest

from tandem.cluster import _wire, _worker_main
from tandem.cluster.base import WorkerSpec
from tandem.cluster.local import LocalCluster


class Evil:
    """Unpickling this creates ``path`` (what an attacker's code would do, harmlessly)."""

    def __init__(self, path: str, padding: int = 0) -> None:
        self.path = path
        self.padding = "x" * padding

    def __reduce__(self):
        return (open, (self.path, "w"))


def read_until_closed(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    out = b""
    while True:
        try:
            chunk = sock.recv(4096)
        except ConnectionResetError:
            return out
        if not chunk:
            return out
        out += chunk


def _send_quietly(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:  # the driver may already have closed it: that is the point
        pass


def test_local_listener_refuses_peers_without_the_key_and_unpickles_nothing(tmp_path):
    cluster = LocalCluster(num_cpus=1)
    io = cluster._io_thread()
    marks = [tmp_path / f"ran_{i}" for i in range(3)]
    try:
        # 1. No key at all: a pickle (small, then one larger than a handshake message).
        for i, padding in ((0, 0), (1, 4096)):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(io.address)
                _send_quietly(s, _wire.encode(("hello", Evil(str(marks[i]), padding))))
                got = read_until_closed(s)
            assert b"#CHALLENGE#" in got and b"#WELCOME#" not in got  # refused, then closed
        # 2. A wrong key: the handshake fails on both sides; what follows is never read.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(io.address)
            with pytest.raises(_wire.AuthenticationError):
                _wire.authenticate_client(s, b"not the session key", timeout_s=30)
            _send_quietly(s, _wire.encode(("hello", Evil(str(marks[2])))))
            read_until_closed(s)
        assert io.refused == 3
        assert not any(m.exists() for m in marks)

        # 3. A real worker (the key travels through the zygote's stdin) still connects, and
        # its user code finds the key neither in its environment nor in its arguments.
        def task(channel):
            import os
            import sys

            channel.send(("seen", list(sys.argv), dict(os.environ)))
            return 0

        frames: queue.SimpleQueue = queue.SimpleQueue()
        placement = cluster.place([{"CPU": 1.0}])
        assert placement is not None
        spec = WorkerSpec("auth-w0", 0, str(tmp_path / "w0.log"))
        cluster.start_workers(placement, [spec], [cloudpickle.dumps(task)],
                              lambda w, f: frames.put(f))
        seen = None
        while True:
            frame = frames.get(timeout=60)
            if frame[0] == "seen":
                seen = frame
            if frame[0] == "__exit__":
                assert frame[1] == 0
                break
        assert seen is not None
        key_hex = io.authkey.hex()
        assert all(key_hex not in a for a in seen[1])
        assert all(key_hex not in v and io.authkey.decode("latin-1") not in v
                   for v in seen[2].values())
        assert io.refused == 3
    finally:
        cluster.shutdown()


def test_a_worker_does_not_unpickle_what_a_driver_without_the_key_sends(tmp_path):
    path = str(tmp_path / "driver.sock")
    mark = tmp_path / "ran"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)

    def fake_driver() -> None:
        conn, _ = listener.accept()
        with conn:
            # A "run" frame straight away, as an impostor listening on the address would.
            _send_quietly(conn, _wire.encode(("run", Evil(str(mark)))))
            read_until_closed(conn)

    t = threading.Thread(target=fake_driver, daemon=True)
    t.start()
    try:
        with pytest.raises(_wire.AuthenticationError):
            _worker_main.run({"address": path, "authkey": os.urandom(32), "worker_id": "w"})
    finally:
        t.join(timeout=30)
        listener.close()
    assert not mark.exists()
