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


class IOThread(threading.Thread):
    """The driver's I/O thread, shared by ``LocalCluster`` and ``RayCluster``: one selector
    over a listening socket the workers connect to, their connections, and a wake-up socket
    other threads poke after queueing work for it.

    Subclasses read worker connections (``_read_conn``) and may add their own readable
    sources (``_on_readable``), a select timeout (``_select_timeout``), work after each
    round (``_after_select``) and clean-up once the loop ends (``_on_stop``). Setting
    ``_stopping`` and calling ``wake()`` ends the loop.
    """

    tcp_nodelay = False

    def __init__(self, name: str, listener: socket.socket) -> None:
        super().__init__(name=name, daemon=True)
        listener.setblocking(False)
        self._listener = listener
        self._sel = selectors.DefaultSelector()
        self._sel.register(listener, selectors.EVENT_READ, ("listen", None))
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        self._stopping = False
        self.alive = True

    def wake(self) -> None:
        """Makes the loop look at its queued work now (callable from any thread)."""
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass

    def run(self) -> None:
        try:
            while not self._stopping:
                for key, _ in self._sel.select(timeout=self._select_timeout()):
                    kind, data = key.data
                    if kind == "listen":
                        accept_all(self._listener, self._sel, tcp_nodelay=self.tcp_nodelay)
                    elif kind == "conn":
                        self._read_conn(key.fileobj, data)  # type: ignore[arg-type]
                    elif kind == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    else:
                        self._on_readable(kind, key.fileobj, data)
                self._after_select()
        except Exception:
            logging.getLogger(type(self).__module__).exception("tandem %s thread failed",
                                                                self.name)
        finally:
            self.alive = False
            self._on_stop()
            for key in list(self._sel.get_map().values()):
                try:
                    key.fileobj.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self._sel.close()

    # -- hooks -------------------------------------------------------------------------
    def _read_conn(self, conn: socket.socket, state: list) -> None:
        """A worker connection is readable; ``state`` is ``[FrameReader, worker | None]``."""
        raise NotImplementedError

    def _on_readable(self, kind: str, fileobj: Any, data: Any) -> None:
        """Another source the subclass registered with ``(kind, data)`` is readable."""

    def _select_timeout(self) -> float:
        return 1.0

    def _after_select(self) -> None:
        """Runs after each round of the loop (queued commands, timers)."""

    def _on_stop(self) -> None:
        """Runs once when the loop ends, before every registered file is closed."""
