"""What the preemption tests share (jobs, server, dashboard): a train loop that checkpoints
every iteration and resumes from it, a higher-priority loop that holds the cluster until
told to end, a train server with priority scheduling and two users, and the waits on a
job's transitions and results.

The loops are source text (``LOOPS``) for the client scripts the server tests run in their
own processes; the in-process tests import ``priority_cluster`` and ``run_high``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.integration.server.conftest import ServerProc

#: ``low(config)``: one iteration of "work" a report, with ``resumed_at`` (the step it
#: resumed from) and ``told`` (whether ``train.get_preemption_info()`` asked it to yield);
#: it checkpoints (the step to resume at) only when told, so the checkpoint that ends its
#: wait to yield is always one taken when told (a checkpoint each iteration could be one
#: reported just after the notice was sent but before the worker saw it: the run then
#: yields on a row that says ``told=False``, as it did once under load). Ends once
#: ``config["finish"]`` exists.
#: ``high(config)``: reports until ``config["finish"]`` exists. A script defines
#: ``get_checkpoint`` and ``report`` (train's or tune's) and ``train`` before these.
LOOPS = """
import contextlib, json, os, tempfile, time

def low(config):
    step = 0
    ckpt = get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "state.json")) as f:
            step = json.load(f)["step"]
    resumed_at = step
    while True:
        told = train.get_preemption_info() is not None
        with contextlib.ExitStack() as stack:  # the checkpoint's folder ends after the report
            checkpoint = None
            if told:
                d = stack.enter_context(tempfile.TemporaryDirectory(dir=config["tmp"]))
                with open(os.path.join(d, "state.json"), "w") as f:
                    json.dump({"step": step + 1}, f)
                checkpoint = Checkpoint.from_directory(d)
            report({"step": step, "resumed_at": resumed_at, "told": told},
                   checkpoint=checkpoint)
        step += 1
        if os.path.exists(config["finish"]):
            return
        time.sleep(0.25)

def high(config):
    i = 0
    while not os.path.exists(config["finish"]):
        report({"i": i})
        i += 1
        time.sleep(0.25)
"""


@dataclass
class PriorityServer:
    """A train server started with ``--scheduling priority`` and users ``alice`` and ``bob``
    (their tokens in ``tokens``); ``store`` holds the runs' results, ``scratch`` their
    checkpoints' temporary folders. Every ``flag`` is created when the server stops, so no
    loop waiting on one outlives the test."""

    srv: ServerProc
    cwd: str
    store: str
    scratch: str
    tokens: dict[str, str]
    flags: list[str] = field(default_factory=list)

    def flag(self, name: str) -> str:
        """A path that ends a loop once it exists (``config["finish"]``)."""
        path = os.path.join(self.cwd, f"{name}.done")
        self.flags.append(path)
        return path

    def results(self, job_id: str) -> list[dict[str, Any]]:
        """The job's reported metrics, in order."""
        with self.srv.http() as c:
            r = c.get(f"/api/jobs/{job_id}/results", params={"limit": 20000})
            assert r.status_code == 200, r.text
            return [row["metrics"] for row in r.json()["results"]]

    def wait_reason(self, job_id: str, state: str, words: str,
                    timeout_s: float = 90) -> dict[str, Any]:
        """The job once its last stored transition is to ``state`` with ``words`` in its
        reason (the state shown is live; its transition is stored a moment later)."""
        deadline = time.monotonic() + timeout_s
        job: dict[str, Any] = {}
        with self.srv.http() as c:
            while time.monotonic() < deadline:
                job = c.get(f"/api/jobs/{job_id}").json()
                last = job["transitions"][-1]
                if last["to_state"] == state and words in (last["reason"] or ""):
                    return job
                time.sleep(0.05)
        raise AssertionError(f"job {job_id}: no transition to {state} with {words!r}: "
                             f"{job.get('transitions')}")


@contextlib.contextmanager
def priority_server(tmp_path: os.PathLike[str]) -> Iterator[PriorityServer]:
    """Starts the server in ``tmp_path`` (its own HOME), adds alice and bob; on exit creates
    every flag and stops the server."""
    from tests.integration.server.conftest import cli, start_server

    root = os.fspath(tmp_path)
    home = os.path.join(root, "home")
    os.makedirs(home)
    srv = start_server(home, os.path.join(root, "storage"), None, "--scheduling", "priority")
    setup = PriorityServer(srv, root, os.path.join(root, "results"),
                           os.path.join(root, "scratch"), {})
    os.makedirs(setup.scratch)
    try:
        for name in ("alice", "bob"):
            out = cli(srv, "users", "add", name)
            assert out.returncode == 0, out.stderr
            setup.tokens[name] = out.stdout.strip().splitlines()[-1]
        yield setup
    finally:
        for path in setup.flags:
            open(path, "w").close()
        srv.stop()


# -- in-process (tandem.init's local cluster) ----------------------------------------------
@contextlib.contextmanager
def priority_cluster() -> Iterator[None]:
    """``tandem.init`` with priority scheduling on 2 CPUs; shut down on exit."""
    import tandem

    tandem.init(num_cpus=2, scheduling="priority", configure_logging=False)
    try:
        yield
    finally:
        tandem.shutdown()


def high_priority_loop(config: Mapping[str, Any]) -> None:
    """Two reports, then done."""
    from tandem import train

    for i in range(2):
        train.report({"i": i})


def run_high(storage_path: str, resources_per_worker: Mapping[str, float] | None = None,
             loop: Callable[..., None] = high_priority_loop) -> Any:
    """Runs a priority-5 run that needs the whole 2-CPU cluster (two 1-CPU workers, or one
    worker with ``resources_per_worker``) to the end; returns its ``Result``."""
    from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

    scaling = (ScalingConfig(num_workers=2) if resources_per_worker is None else
               ScalingConfig(num_workers=1, resources_per_worker=dict(resources_per_worker)))
    return DataParallelTrainer(
        loop, scaling_config=scaling,
        run_config=RunConfig(name="high", storage_path=storage_path, verbose=0, priority=5),
    ).fit()


def wait_reports(handle: Any, n: int) -> None:
    """Returns once the run behind ``handle`` (``fit(block=False)``) has reported ``n``
    times."""
    for k, _ in enumerate(handle.results(), start=1):
        if k >= n:
            return
