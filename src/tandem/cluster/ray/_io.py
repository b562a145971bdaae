"""The driver's side of Ray workers: one TCP I/O thread (``RayIO``, on the I/O base the
local cluster uses too) and a handle per worker actor (``RayWorker``)."""

from __future__ import annotations

import logging
import queue
import signal
import socket
import time
from typing import Any

from tandem.cluster import _wire
from tandem.cluster.base import Sink, WorkerProcess, WorkerSpec
from tandem.cluster.ray._connect import import_ray

logger = logging.getLogger(__name__)

_KILLED = -int(signal.SIGKILL)


class RayWorker(_wire.SocketWorker, WorkerProcess):
    """The driver's handle on one ``_TandemWorker`` actor."""

    def __init__(self, io: RayIO, spec: WorkerSpec, node_id: str, node_ip: str, sink: Sink,
                 objects: Any) -> None:
        self._init_endpoint(spec, node_id, node_ip, sink)
        self._io = io
        self._objects = objects  # keeps Ray handles (dataset iterators) alive with the worker
        self._state: list | None = None
        self._log: Any = None
        self.actor: Any = None
        self.ref: Any = None
        self.placement_id = ""
        self.on_exit: Any = None
        # I/O-thread state
        self._eof_sent = False
        self._exited = False
        self._pending_exit: int | None = None
        self.exitcode: int | None = None

    def kill(self) -> None:
        if self._killed:
            return
        self._killed = True
        if self.actor is not None:
            ray = import_ray()
            try:
                ray.kill(self.actor, no_restart=True)
            except Exception:  # noqa: BLE001, S110 - already dead, or Ray is shutting down
                pass
        self._io.post(("kill", self))

    def _write_log(self, data: bytes) -> None:
        try:
            if self._log is None:
                self._log = open(self.log_path, "ab", buffering=0)  # noqa: SIM115
            self._log.write(data)
        except OSError:
            pass

    def _close_log(self) -> None:
        if self._log is not None:
            try:
                self._log.close()
            except OSError:
                pass
            self._log = None


def exit_code(worker: RayWorker, fut: Any) -> int:
    """The worker's exit status from its run() call: its return value, 1 if the actor raised,
    SIGKILL's number (negative) if the actor died (killed, or its node was lost)."""
    try:
        return int(fut.result())
    except Exception as e:  # noqa: BLE001
        ray = import_ray()
        died = isinstance(e, ray.exceptions.RayActorError)
        if not worker._killed:
            what = "died" if died else "failed"
            worker._io.post(("log", worker, f"\ntandem: the Ray actor of worker {worker.worker_id} "
                                            f"{what}: {type(e).__name__}: {e}\n".encode()))
        return _KILLED if died else 1


class RayIO(_wire.IOThread):
    """Owns the TCP listener the worker actors connect to and every worker connection.

    The listener is bound on the node's address (workers on other nodes connect to it), so
    anyone who can reach that port may connect: a connection is read only after the peer
    passed the HMAC handshake with ``authkey`` (see ``tandem.cluster._wire``), which the
    actors receive in their ``run`` call's arguments.

    Delivers each worker's frames to its sink in order, then ``("__eof__",)`` and
    ``("__exit__", code)`` exactly once each; ``("__log__", bytes)`` frames are written to
    the worker's log file instead.
    """

    _EXIT_GRACE_S = 2.0  # after the actor's run() ended, how long to wait for its bytes
    tcp_nodelay = True

    def __init__(self, host: str) -> None:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.socket(family, socket.SOCK_STREAM)
        listener.bind((host, 0))
        listener.listen(1024)
        super().__init__("tandem-ray-io", listener)
        self.address = (host, listener.getsockname()[1])
        self._cmds: queue.SimpleQueue = queue.SimpleQueue()
        self._by_id: dict[str, RayWorker] = {}
        self._timers: dict[RayWorker, float] = {}

    # -- other threads -----------------------------------------------------------------
    def register(self, worker: RayWorker) -> None:
        self.post(("register", worker))

    def post(self, cmd: tuple) -> None:
        self._cmds.put(cmd)
        self.wake()

    def stop(self) -> None:
        workers = list(self._by_id.values())
        for w in workers:
            w.kill()
        self._stopping = True
        self.post(("stop",))
        self.join(timeout=5)

    # -- the loop (tandem.cluster._wire.IOThread hooks) --------------------------------
    def _select_timeout(self) -> float:
        if self._timers:
            return max(0.0, min(1.0, min(self._timers.values()) - time.monotonic()))
        return 1.0

    def _after_select(self) -> None:
        self._run_commands()
        now = time.monotonic()
        for w, deadline in list(self._timers.items()):
            if deadline <= now:
                self._close_conn(w)

    def _on_stop(self) -> None:
        for w in list(self._by_id.values()):
            self._close_conn(w)
            self._exit(w, _KILLED)

    def _run_commands(self) -> None:
        while True:
            try:
                cmd = self._cmds.get_nowait()
            except queue.Empty:
                return
            kind, *args = cmd
            if kind == "register":
                w = args[0]
                self._by_id[w.worker_id] = w
            elif kind == "exit":
                w, code = args
                if w._killed:
                    code = _KILLED
                if w._exited or w._pending_exit is not None:
                    continue
                if w._eof_sent:
                    self._exit(w, code)
                else:
                    # Its last bytes (or even its hello) may still be on the way: wait for
                    # its EOF, a little while at most.
                    w._pending_exit = code
                    self._timers[w] = time.monotonic() + self._EXIT_GRACE_S
            elif kind == "kill":
                w = args[0]
                self._drain(w)
                self._close_conn(w)
                self._exit(w, _KILLED)
            elif kind == "log":
                args[0]._write_log(args[1])

    def _read_conn(self, conn: socket.socket, state: list) -> None:
        reader, worker = state
        data = _wire.recv_some(conn)
        if data is None:
            return
        if not data:
            self._drop(conn)
            if worker is not None:
                self._close_conn(worker)
            return
        try:
            frames = reader.feed(data)
        except Exception:  # noqa: BLE001 - not one of ours
            self._drop(conn)
            return
        for frame in frames:
            if worker is None:
                # The peer passed the handshake (it holds the session key): a worker of ours.
                ok = isinstance(frame, tuple) and len(frame) == 3 and frame[0] == "hello"
                w = self._by_id.get(frame[1]) if ok else None
                if w is None or w._eof_sent or w._conn is not None:
                    self._drop(conn)
                    return
                worker = state[1] = w
                w._conn = conn
                w._state = state
                w._pid = frame[2]
                w._deliver(("__connected__", frame[2]))
            elif frame[0] == "__log__":
                worker._write_log(frame[1])
            else:
                worker._deliver(frame)

    def _drain(self, w: RayWorker) -> None:
        """Reads what a worker already sent before its connection is cut (kill)."""
        conn, state = w._conn, w._state
        if conn is None or state is None:
            return
        for _ in range(64):
            if w._conn is None:
                return
            try:
                ready = conn.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                ready = b""
            if not ready:
                return  # EOF: _close_conn follows
            self._read_conn(conn, state)

    def _drop(self, conn: socket.socket) -> None:
        try:
            self._sel.unregister(conn)
        except (KeyError, ValueError):
            pass
        try:
            conn.close()
        except OSError:
            pass

    def _close_conn(self, w: RayWorker) -> None:
        """The worker's connection is over: deliver its EOF (and a pending exit)."""
        conn, w._conn = w._conn, None
        if conn is not None:
            self._drop(conn)
        if not w._eof_sent:
            w._eof_sent = True
            w._deliver(("__eof__",))
        if w._pending_exit is not None:
            self._exit(w, w._pending_exit)

    def _exit(self, w: RayWorker, code: int) -> None:
        self._timers.pop(w, None)
        w._pending_exit = None
        if w._exited:
            return
        w._exited = True
        w.exitcode = code
        w._close_log()
        self._by_id.pop(w.worker_id, None)
        w._deliver(("__exit__", code))
        if w.on_exit is not None:
            try:
                w.on_exit(w)
            except Exception:
                logger.exception("ending a worker's Ray actor failed")
