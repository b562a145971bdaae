"""Length-prefixed pickle frames over a stream socket or pipe.

One frame is a 4-byte big-endian length followed by a pickle. The driver side reads
non-blocking through ``FrameReader``; worker and zygote sides use blocking ``send``/``recv``.
"""

from __future__ import annotations

import logging
import pickle
import selectors
import socket
import struct
import threading
from typing import Any

_HEADER = struct.Struct(">I")
_PROTOCOL = pickle.HIGHEST_PROTOCOL


def encode(obj: Any) -> bytes:
    payload = pickle.dumps(obj, protocol=_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


def send_frame(sock: socket.socket, lock: threading.Lock, obj: Any) -> None:
    """Sends one frame on a socket the I/O thread also reads; a closed peer is ignored."""
    data = encode(obj)
    with lock:
        try:
            sock.setblocking(True)
            sock.sendall(data)
        except OSError:
            pass


def accept_all(listener: socket.socket, sel: Any, tcp_nodelay: bool = False) -> None:
    """Accepts every pending connection and registers it for reading as a new worker stream
    (``("conn", [FrameReader(), None])``; the worker is known once its hello arrives)."""
    while True:
        try:
            conn, _ = listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        if tcp_nodelay:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn.setblocking(False)
        sel.register(conn, selectors.EVENT_READ, ("conn", [FrameReader(), None]))


def recv_some(conn: socket.socket) -> bytes | None:
    """What a readable socket has: None if nothing yet, ``b""`` once it is closed or broken."""
    try:
        return conn.recv(1 << 18)
    except (BlockingIOError, InterruptedError):
        return None
    except OSError:
        return b""


class FrameReader:
    """Accumulates bytes and yields complete frames (non-blocking reads)."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[Any]:
        self._buf += data
        out = []
        buf = self._buf
        pos = 0
        n = len(buf)
        while n - pos >= 4:
            (size,) = _HEADER.unpack_from(buf, pos)
            if n - pos - 4 < size:
                break
            out.append(pickle.loads(bytes(buf[pos + 4 : pos + 4 + size])))
            pos += 4 + size
        if pos:
            del buf[:pos]
        return out


class SocketChannel:
    """A blocking, thread-safe frame channel over a connected socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._send_lock = threading.Lock()
        self._reader = FrameReader()
        self._pending: list[Any] = []

    def send(self, obj: Any) -> None:
        data = encode(obj)
        with self._send_lock:
            self._sock.sendall(data)

    def recv(self) -> Any:
        """The next frame; raises ``EOFError`` when the peer closed the connection."""
        while not self._pending:
            data = self._sock.recv(1 << 16)
            if not data:
                raise EOFError("connection closed")
            self._pending.extend(self._reader.feed(data))
        return self._pending.pop(0)

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass

    def fileno(self) -> int:
        return self._sock.fileno()


class SocketWorker:
    """What a driver-side worker handle reached over a socket shares (local and Ray):
    identity, the connection, ``send``, and delivery of frames to the job's sink."""

    def _init_endpoint(self, spec: Any, node_id: str, node_ip: str, sink: Any) -> None:
        self.worker_id = spec.worker_id
        self.node_id = node_id
        self.node_ip = node_ip
        self.log_path = spec.log_path
        self._sink = sink
        self._pid: int | None = None
        self._conn: socket.socket | None = None
        self._send_lock = threading.Lock()
        self._killed = False

    @property
    def pid(self) -> int | None:
        return self._pid

    def send(self, obj: Any) -> None:
        conn = self._conn
        if conn is not None:
            send_frame(conn, self._send_lock, obj)

    def _deliver(self, frame: Any) -> None:
        try:
            self._sink(self, frame)
        except Exception:  # a sink must never kill the I/O thread
            logging.getLogger("tandem.cluster").exception("worker frame handler failed")
