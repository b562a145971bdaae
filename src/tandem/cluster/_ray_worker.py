"""What a tandem worker runs inside its Ray actor: connect back, run the task, stream output.

The actor connects to the driver's TCP listener, passes the HMAC handshake with the
session key (``tandem.cluster._wire``; the key came in ``run``'s arguments), says
``("hello", worker_id, pid)`` and runs the same cloudpickled ``task(channel)`` a local worker runs. Its stdout and stderr
(file descriptors 1 and 2) go to the driver as ``("__log__", bytes)`` frames for the
duration of the task, so logs reach the run folder as on one machine even when the node
shares no filesystem with the driver. If the driver goes away, the actor exits at once.

This module is imported in Ray worker processes; it does not import Ray itself (the actor
holds no Ray resources: the driver passes its bundle's ``CUDA_VISIBLE_DEVICES``).
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Mapping
from typing import Any

import cloudpickle

from tandem.cluster._wire import SocketChannel, authenticate_client
from tandem.cluster._worker_main import WorkerChannel, mark_worker_process


class _ActorChannel(WorkerChannel):
    """A ``WorkerChannel`` whose end does not kill the process when the task closes it."""

    def __init__(self, channel: SocketChannel, worker_id: str, objects: Mapping[str, Any]) -> None:
        super().__init__(channel, worker_id)
        self.objects = dict(objects)


class _OutputPump:
    """Redirects fds 1 and 2 into a pipe whose contents go to the driver as log frames."""

    def __init__(self, channel: SocketChannel) -> None:
        self._channel = channel
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        self._saved = (os.dup(1), os.dup(2))
        r, w = os.pipe()
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.close(w)
        self._r = r
        self._thread = threading.Thread(target=self._pump, name="tandem-output", daemon=True)
        self._thread.start()

    def _pump(self) -> None:
        try:
            while True:
                data = os.read(self._r, 1 << 16)
                if not data:
                    break
                self._channel.send(("__log__", data))
        except OSError:
            pass
        finally:
            os.close(self._r)

    def close(self, timeout_s: float = 2.0) -> None:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (AttributeError, ValueError, OSError):
                pass
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        for fd in self._saved:
            os.close(fd)
        # Subprocesses the task left behind may still hold the pipe open: do not wait forever.
        self._thread.join(timeout_s)


class _TandemWorker:
    """The Ray actor class (wrapped with ``ray.remote`` by ``RayCluster``). One per worker."""

    def run(self, spec: dict, task_bytes: bytes, objects: Mapping[str, object]) -> int:
        mark_worker_process()
        # The actor holds no Ray resources (its placement group bundle does): the driver
        # passes the bundle's CUDA_VISIBLE_DEVICES in env.
        env = dict(spec.get("env") or {})
        os.environ.update(env)
        if spec.get("cwd") and os.path.isdir(spec["cwd"]):
            os.chdir(spec["cwd"])
        for p in reversed(spec.get("sys_path") or []):
            if p not in sys.path and (not p or os.path.exists(p)):
                sys.path.insert(0, p)
        if spec.get("argv") is not None:
            sys.argv[:] = spec["argv"]  # the train function sees the driver's arguments
        working_dir = os.environ.get("TANDEM_WORKING_DIR")
        if working_dir and working_dir not in sys.path:
            sys.path.insert(0, working_dir)  # the job's uploaded code (train server runtime_env)

        host, port = spec["address"]
        sock = socket.create_connection((host, port), timeout=30)
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        # Both ends prove they hold the session key before a single pickle crosses.
        authenticate_client(sock, spec.pop("authkey"))
        channel = SocketChannel(sock)
        channel.send(("hello", spec["worker_id"], os.getpid()))
        wc = _ActorChannel(channel, spec["worker_id"], objects)
        pump = _OutputPump(channel)
        code = 1
        try:
            threading.Thread(target=wc._read_forever, name="tandem-control", daemon=True).start()
            task = cloudpickle.loads(task_bytes)
            code = int(task(wc) or 0)
        except BaseException:  # noqa: BLE001 - reported in the worker's log
            import traceback

            traceback.print_exc()
        finally:
            pump.close()
            wc.closing = True
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            channel.close()
        return code
