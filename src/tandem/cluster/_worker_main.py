"""What a worker process runs after the zygote forks it: connect, receive a task, run it.

The worker authenticates its connection first (an HMAC challenge in both directions with
the session's key, which arrived in ``spec`` through the zygote's stdin pipe); only then
are frames exchanged. The cluster layer knows nothing of training. A task is a cloudpickled callable
``task(channel) -> int`` from a higher layer; ``channel`` sends frames to the driver
(``channel.send``) and delivers the driver's frames to a handler the task registers
(``channel.on_message``). If the driver goes away, the worker exits at once.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any

import cloudpickle

from tandem.cluster._wire import SocketChannel, authenticate_client


class WorkerChannel:
    """The worker's end of its connection to the driver."""

    def __init__(self, channel: SocketChannel, worker_id: str) -> None:
        self.objects: dict = {}  # WorkerSpec.objects, on clusters that pass them (Ray)
        self._channel = channel
        self.worker_id = worker_id
        self._handler: Callable[[Any], None] | None = None
        self.closing = False  # set by a host that ends the connection on purpose

    def send(self, obj: Any) -> None:
        self._channel.send(obj)

    def on_message(self, handler: Callable[[Any], None]) -> None:
        """Registers the function that receives the driver's frames (on a reader thread)."""
        self._handler = handler

    def _read_forever(self) -> None:
        try:
            while True:
                msg = self._channel.recv()
                handler = self._handler
                if handler is not None:
                    handler(msg)
        except (EOFError, OSError):
            pass
        if not self.closing:
            # The driver is gone (or closed us): nothing may outlive it.
            os._exit(1)


def enter_job(job: dict) -> None:
    """Takes on a job's worker identity: output into its log file, its environment, working
    directory, ``sys.path`` and ``sys.argv`` (the driver's, so the train function sees them)."""
    log = os.open(job["log_path"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.update(job.get("env") or {})
    if job.get("cwd"):
        os.chdir(job["cwd"])
    if job.get("sys_path"):
        sys.path[:] = job["sys_path"]
    if job.get("argv") is not None:
        sys.argv[:] = job["argv"]


def _connect(spec: dict) -> SocketChannel:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(spec["address"])
    # Prove we hold the session's key and check the driver does, before any pickle. The
    # key is dropped from the spec: user code that prints its environment never sees it.
    authenticate_client(sock, spec.pop("authkey"))
    return SocketChannel(sock)


def run(spec: dict) -> int:
    """A worker forked for one job (``enter_job`` was applied by the zygote)."""
    channel = _connect(spec)
    channel.send(("hello", spec["worker_id"], os.getpid()))
    msg = channel.recv()
    if msg[0] != "run":
        return 1
    return _run_task(channel, spec["worker_id"], msg[1])


def run_warm(spec: dict, on_assign: Callable[[], None] | None = None) -> int:
    """A warm worker (``tandem.cluster._pool``): connects and authenticates ahead of demand,
    then waits for ``("assign", job, task)`` — or ``("retire",)`` when the pool shrinks."""
    channel = _connect(spec)
    channel.send(("hello", spec["warm_id"], os.getpid()))
    try:
        msg = channel.recv()
    except (EOFError, OSError):
        return 0  # the driver went away while we waited: nothing to do, nothing to say
    if msg[0] != "assign":
        return 0
    job = msg[1]
    if on_assign is not None:
        on_assign()
    enter_job(job)
    return _run_task(channel, job["worker_id"], msg[2])


def _run_task(channel: SocketChannel, worker_id: str, task_bytes: bytes) -> int:
    working_dir = os.environ.get("TANDEM_WORKING_DIR")
    if working_dir and working_dir not in sys.path:
        sys.path.insert(0, working_dir)  # the job's uploaded code (train server runtime_env)
    task = cloudpickle.loads(task_bytes)
    wc = WorkerChannel(channel, worker_id)
    threading.Thread(target=wc._read_forever, name="tandem-control", daemon=True).start()
    return int(task(wc) or 0)
