"""Length-prefixed pickle frames over a stream socket or pipe, after an HMAC handshake.

One frame is a 4-byte big-endian length followed by a pickle. The driver side reads
non-blocking through ``FrameReader``; worker and zygote sides use blocking ``send``/``recv``.

Nothing read from a socket is unpickled before the peer proved it holds the session's
secret key: every worker connection starts with a challenge/response handshake, the one
``multiprocessing.connection`` runs (``deliver_challenge`` / ``answer_challenge``: an HMAC
over a fresh random challenge, in both directions; here HMAC-SHA256, as Python 3.12's, where
3.11's is HMAC-MD5), run on the socket by ``authenticate_server`` (the driver: challenges
first) and ``authenticate_client`` (the worker: answers first). The handshake's messages are
raw bytes (at most 256 each), never pickles. It is written here rather than imported:
``multiprocessing.connection`` and ``secrets`` cost ~20 ms of imports in every process that
starts a worker (the zygote's start is on the path to a program's first trial), for two
functions of a dozen lines over ``hmac``. The key reaches a
worker out of band: through the zygote's stdin pipe (local) or the actor call's arguments
(Ray), never on a command line or in the environment. See docs/security.md ("Between workers and drivers").
"""

from __future__ import annotations

import hmac
import logging
import os
import pickle
import queue
import selectors
import socket
import struct
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import concurrent.futures

_HEADER = struct.Struct(">I")
_PROTOCOL = pickle.HIGHEST_PROTOCOL


def encode(obj: object) -> bytes:
    payload = pickle.dumps(obj, protocol=_PROTOCOL)
    return _HEADER.pack(len(payload)) + payload


def send_frame(sock: socket.socket, lock: threading.Lock, obj: object) -> None:
    """Sends one frame on a socket the I/O thread also reads; a closed peer is ignored."""
    data = encode(obj)
    with lock:
        try:
            sock.setblocking(True)
            sock.sendall(data)
        except OSError:
            pass


class AuthenticationError(Exception):
    """The peer does not hold this session's key (or is no tandem peer)."""


HANDSHAKE_TIMEOUT_S = 30.0
"""How long one handshake message may take to arrive (a worker on a loaded machine)."""
_MAX_HANDSHAKE_MESSAGE = 256
_CHALLENGE = b"#CHALLENGE#"
_WELCOME = b"#WELCOME#"
_FAILURE = b"#FAILURE#"
_CHALLENGE_BYTES = 40
_DIGEST = "sha256"


def new_authkey() -> bytes:
    """A fresh session secret (32 random bytes from the OS, as ``secrets.token_bytes``)."""
    return os.urandom(32)


class _HandshakeConnection:
    """Length-prefixed raw bytes (``send_bytes`` / ``recv_bytes``) on a blocking socket."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock

    def send_bytes(self, buf: bytes) -> None:
        self._sock.sendall(_HEADER.pack(len(buf)) + bytes(buf))

    def recv_bytes(self, maxlength: int | None = None) -> bytes:
        (size,) = _HEADER.unpack(self._recv_exact(_HEADER.size))
        limit = _MAX_HANDSHAKE_MESSAGE if maxlength is None else min(maxlength,
                                                                     _MAX_HANDSHAKE_MESSAGE)
        if size > limit:
            raise AuthenticationError(
                f"the peer sent a {size}-byte message during the handshake (at most {limit}): "
                f"not a tandem peer holding this session's key"
            )
        return self._recv_exact(size)

    def _recv_exact(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self._sock.recv(n - len(out))
            if not chunk:
                raise EOFError("the peer closed the connection during the handshake")
            out += chunk
        return bytes(out)


def _deliver_challenge(conn: _HandshakeConnection, authkey: bytes) -> None:
    """Sends a fresh random challenge; the peer must answer with its HMAC under the key."""
    message = os.urandom(_CHALLENGE_BYTES)
    conn.send_bytes(_CHALLENGE + message)
    response = conn.recv_bytes()
    if hmac.compare_digest(response, hmac.new(authkey, message, _DIGEST).digest()):
        conn.send_bytes(_WELCOME)
        return
    conn.send_bytes(_FAILURE)
    raise AuthenticationError("the peer's answer to the challenge was wrong: it does not "
                              "hold this session's key")


def _answer_challenge(conn: _HandshakeConnection, authkey: bytes) -> None:
    """Answers the peer's challenge with its HMAC under the key; the peer says if it holds."""
    message = conn.recv_bytes()
    if not message.startswith(_CHALLENGE) or \
            len(message) < len(_CHALLENGE) + _CHALLENGE_BYTES:
        raise AuthenticationError(f"the peer sent no valid challenge (got {message[:20]!r})")
    conn.send_bytes(hmac.new(authkey, message[len(_CHALLENGE):], _DIGEST).digest())
    if conn.recv_bytes() != _WELCOME:
        raise AuthenticationError("the peer rejected the answer to its challenge: it does "
                                  "not hold this session's key")


def authenticate_server(sock: socket.socket, authkey: bytes,
                        timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """The driver's side of the handshake (as ``multiprocessing.connection.Listener``):
    challenge the peer, then answer its challenge. Raises ``AuthenticationError`` (wrong or
    no key), ``EOFError`` or ``OSError`` (closed, timed out); nothing is unpickled."""
    sock.settimeout(timeout_s)
    conn = _HandshakeConnection(sock)
    _deliver_challenge(conn, authkey)
    _answer_challenge(conn, authkey)
    sock.settimeout(None)


def authenticate_client(sock: socket.socket, authkey: bytes,
                        timeout_s: float = HANDSHAKE_TIMEOUT_S) -> None:
    """The worker's side (as ``multiprocessing.connection.Client``): answer the driver's
    challenge, then challenge the driver, before the first frame is sent or read."""
    sock.settimeout(timeout_s)
    conn = _HandshakeConnection(sock)
    _answer_challenge(conn, authkey)
    _deliver_challenge(conn, authkey)
    sock.settimeout(None)


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

    def send(self, obj: object) -> None:
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

    def send(self, obj: object) -> None:
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

    A connection reaches ``_read_conn`` only once its peer passed the handshake with
    ``authkey`` (``authenticate_server``, run on a small pool of threads so that a slow or
    silent peer never stalls the loop); a peer that fails it is closed unread and counted
    in ``refused``.
    """

    tcp_nodelay = False
    handshake_threads = 16
    handshake_timeout_s = HANDSHAKE_TIMEOUT_S

    def __init__(self, name: str, listener: socket.socket, authkey: bytes | None = None) -> None:
        super().__init__(name=name, daemon=True)
        self.authkey = authkey if authkey is not None else new_authkey()
        self.refused = 0
        self._handshakes: concurrent.futures.ThreadPoolExecutor | None = None
        self._in_handshake: set[socket.socket] = set()
        self._hs_lock = threading.Lock()
        self._authenticated: queue.SimpleQueue = queue.SimpleQueue()
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
                        self._accept()
                    elif kind == "conn":
                        self._read_conn(key.fileobj, data)  # type: ignore[arg-type]
                    elif kind == "wake":
                        try:
                            self._wake_r.recv(4096)
                        except OSError:
                            pass
                    else:
                        self._on_readable(kind, key.fileobj, data)
                self._register_authenticated()
                self._after_select()
        except Exception:
            logging.getLogger(type(self).__module__).exception("tandem %s thread failed",
                                                                self.name)
        finally:
            self.alive = False
            self._end_handshakes()
            self._on_stop()
            for key in list(self._sel.get_map().values()):
                try:
                    key.fileobj.close()  # type: ignore[union-attr]
                except OSError:
                    pass
            self._sel.close()

    # -- authentication ------------------------------------------------------------------
    def _accept(self) -> None:
        """Accepts every pending connection and hands it to the handshake pool."""
        while True:
            try:
                conn, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError:  # e.g. out of file descriptors: try again next round
                return
            if self._handshakes is None:
                # imported here: the zygote and the workers (which import this module) never
                # accept connections, and a fresh program's start need not pay for it
                import concurrent.futures

                self._handshakes = concurrent.futures.ThreadPoolExecutor(
                    self.handshake_threads, thread_name_prefix=f"{self.name}-handshake")
            with self._hs_lock:
                self._in_handshake.add(conn)
            try:
                self._handshakes.submit(self._authenticate, conn)
            except RuntimeError:  # the interpreter is exiting (its pools are shut down)
                with self._hs_lock:
                    self._in_handshake.discard(conn)
                _close(conn)
                self._stopping = True
                return

    def _authenticate(self, conn: socket.socket) -> None:
        """On a pool thread: the handshake; an authenticated connection goes to the loop."""
        if self._stopping:
            with self._hs_lock:
                self._in_handshake.discard(conn)
            _close(conn)
            return
        try:
            conn.setblocking(True)
            authenticate_server(conn, self.authkey, self.handshake_timeout_s)
        except Exception as e:  # noqa: BLE001 - whatever the peer did, it is refused
            self.refused += 1
            if self._stopping:  # cut short by our own shutdown: nothing to report
                _close(conn)
                return
            logging.getLogger("tandem.cluster").warning(
                "refused a connection to the worker listener of %s: %s: %s (a peer "
                "must prove it holds this session's key before anything it sends is read)",
                self.name, type(e).__name__, e)
            with self._hs_lock:
                self._in_handshake.discard(conn)
            _close(conn)
            return
        with self._hs_lock:
            self._in_handshake.discard(conn)
            if self._stopping:
                _close(conn)
                return
            self._authenticated.put(conn)
        self.wake()

    def _register_authenticated(self) -> None:
        """Registers connections that passed the handshake as new worker streams
        (``("conn", [FrameReader(), None])``; the worker is known once its hello arrives)."""
        while True:
            try:
                conn = self._authenticated.get_nowait()
            except queue.Empty:
                return
            if self.tcp_nodelay:
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            conn.setblocking(False)
            self._sel.register(conn, selectors.EVENT_READ, ("conn", [FrameReader(), None]))

    def _end_handshakes(self) -> None:
        with self._hs_lock:
            self._stopping = True
            pending, self._in_handshake = list(self._in_handshake), set()
        for conn in pending:  # unblocks the pool threads at once
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._handshakes is not None:
            self._handshakes.shutdown(wait=False)  # queued ones see _stopping
        while True:
            try:
                _close(self._authenticated.get_nowait())
            except queue.Empty:
                break

    # -- hooks -------------------------------------------------------------------------
    def _read_conn(self, conn: socket.socket, state: list) -> None:
        """A worker connection is readable; ``state`` is ``[FrameReader, worker | None]``."""
        raise NotImplementedError

    def _on_readable(self, kind: str, fileobj: object, data: object) -> None:
        """Another source the subclass registered with ``(kind, data)`` is readable."""

    def _select_timeout(self) -> float:
        return 1.0

    def _after_select(self) -> None:
        """Runs after each round of the loop (queued commands, timers)."""

    def _on_stop(self) -> None:
        """Runs once when the loop ends, before every registered file is closed."""


def _close(conn: socket.socket) -> None:
    try:
        conn.close()
    except OSError:
        pass
