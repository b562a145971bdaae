"""Warm workers (tandem.cluster._pool): the size policy on a fake clock, then real processes
— a gang starts on warm workers, each task starts from the zygote's clean state, an idle
pool empties itself, and a new heavy import retires the warm workers forked before it."""

from __future__ import annotations

import queue
import time

import cloudpickle
import psutil
import pytest

from tandem._core.errors import ConfigError
from tandem.cluster._pool import WarmPoolConfig, WarmPoolPolicy
from tandem.cluster.base import WorkerSpec
from tandem.cluster.local import LocalCluster


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_the_pool_follows_demand_within_its_bounds():
    clock = Clock()
    policy = WarmPoolPolicy(WarmPoolConfig(max_workers=3, idle_s=10, burst_window_s=1), clock)
    assert policy.target() == 0  # nothing asked for yet: nothing kept
    policy.on_start(2)
    assert policy.target() == 2  # one gang of two
    clock.t += 0.2
    policy.on_start(1)
    policy.on_start(1)
    assert policy.target() == 3  # a burst of 4 workers, capped at max_workers
    clock.t += 5
    assert policy.target() == 2  # the burst is over; the largest recent gang remains
    assert not policy.expired(clock.t - 9.9) and policy.expired(clock.t - 10)
    clock.t += 10
    assert policy.target() == 0  # idle for idle_s: the pool gives everything back
    off = WarmPoolPolicy(WarmPoolConfig(max_workers=0), clock)
    off.on_start(4)
    assert off.target() == 0
    for bad in ({"max_workers": -1}, {"max_workers": 1.5}, {"idle_s": 0}, {"burst_window_s": True}):
        with pytest.raises(ConfigError, match="WarmPoolConfig"):
            WarmPoolConfig(**bad)


def _run(cluster, placement, tmp_path, task, name, preload=(), reuse_key=None, code=0):
    frames: queue.SimpleQueue = queue.SimpleQueue()
    spec = WorkerSpec(name, 0, str(tmp_path / f"{name}.log"), env={"JOB_VAR": name},
                      cwd=str(tmp_path), preload=tuple(preload), reuse_key=reuse_key)
    (worker,) = cluster.start_workers(placement, [spec], [cloudpickle.dumps(task)],
                                      lambda w, f: frames.put(f))
    out = []
    # the exit notice travels apart from the connection and can overtake the task's last
    # frames: a process that exits is done once its stream has ended too (a worker kept
    # for reuse keeps its connection: its exit notice comes in the stream's order)
    exited = ended = False
    while not (exited and (ended or reuse_key is not None)):
        frame = frames.get(timeout=60)
        if frame[0] == "__exit__":
            assert frame[1] == code, (tmp_path / f"{name}.log").read_text()
            exited = True
        elif frame[0] == "__eof__":
            ended = True
        elif frame[0] != "__connected__":
            out.append(frame)
    return worker, out


def dirty_task(channel):
    import colorsys  # noqa: F401 - a module the zygote had not imported
    import os
    import sys

    os.environ["LEFT_BEHIND"] = "1"
    os.chdir("/")
    sys.path.insert(0, "/left/behind")
    globals()["leak"] = bytearray(1 << 20)
    channel.send(("state", os.getpid(), os.environ.get("JOB_VAR"), os.getcwd()))
    return 0


def probe_task(channel):
    import os
    import sys

    channel.send(("state", os.getpid(), os.environ.get("JOB_VAR"), os.getcwd(),
                  "colorsys" in sys.modules, "LEFT_BEHIND" in os.environ,
                  "/left/behind" in sys.path, "leak" in globals()))
    return 0


def test_gangs_start_on_warm_workers_each_from_a_clean_state(tmp_path):
    # idle_s long enough that the warm worker waits for the second task however loaded
    # the machine (with 1 s it was let go first once); its going is checked by moving the
    # pool's clock past idle_s below, not by waiting it out
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=2, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        io = cluster._io_thread()
        w1, out1 = _run(cluster, placement, tmp_path, dirty_task, "t1")
        assert io.warm_used == 0  # the very first start had nothing warm yet
        assert out1 == [("state", w1.pid, "t1", "/")]
        _wait(lambda: len(cluster.warm_worker_pids()) == 1)  # refilled after that start
        warm_pid = cluster.warm_worker_pids()[0]
        assert psutil.Process(warm_pid).name() == "tandem-warm"
        # the zygote, asked now: the warm worker runs one task and exits (its pid is gone later)
        zygote = psutil.Process(warm_pid).ppid()
        w2, out2 = _run(cluster, placement, tmp_path, probe_task, "t2")
        assert io.warm_used == 1 and w2.pid == warm_pid  # it ran on the warm worker
        # The job's env and cwd; nothing of the earlier task (module, env, path, globals).
        assert out2 == [("state", warm_pid, "t2", str(tmp_path), False, False, False, False)]
        assert _gone(w1.pid)
        _wait(lambda: _gone(warm_pid))  # one task per warm worker: it exits after its task
        _wait(lambda: len(cluster.warm_worker_pids()) >= 1)  # refilled again
        # Idle for idle_s (the pool's clock moved past it): the pool lets its warm workers go.
        # (the zygote's own children only: a warm worker of another cluster of this test
        # process, a fixture's, is no business of this pool). First the pool settles: a
        # round of learned imports that ends after the clock moved forks warm workers idle
        # from then on, which stay (seen once in a loaded full suite)
        _wait(lambda: io.learn_outstanding == 0 and io._learn_queue.empty()
              and not io._warm_pending)
        policy = io._policy
        start = policy.now()
        policy._clock = lambda: start + 61.0 + (time.monotonic() - start)
        _wait(lambda: cluster.warm_worker_pids() == [] and not _warm_children(zygote),
              what=lambda: (cluster.warm_worker_pids(), _warm_children(zygote)))
    finally:
        cluster.shutdown()


def test_a_new_heavy_import_retires_the_warm_workers_forked_before_it(tmp_path):
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=1, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        io = cluster._io_thread()
        _run(cluster, placement, tmp_path, probe_task, "a")
        _wait(lambda: len(cluster.warm_worker_pids()) == 1)
        stale = cluster.warm_worker_pids()[0]

        def needs_colorsys(channel):
            import sys

            channel.send(("had", "colorsys" in sys.modules))
            return 0

        w, out = _run(cluster, placement, tmp_path, needs_colorsys, "b", preload=["colorsys"])
        assert out == [("had", True)] and w.pid != stale  # not the warm worker without it
        _wait(lambda: _gone(stale))
        _wait(lambda: len(cluster.warm_worker_pids()) == 1)  # a new one, with colorsys
        w, out = _run(cluster, placement, tmp_path, needs_colorsys, "c", preload=["colorsys"])
        assert out == [("had", True)] and io.warm_used == 1
    finally:
        cluster.shutdown()


def _warm_children(parent: int | None = None) -> list:
    """Live processes named ``tandem-warm`` under ``parent`` (default: this process)."""
    try:
        children = psutil.Process(parent).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    out = []
    for c in children:
        try:
            if c.status() != "zombie" and c.name() == "tandem-warm":
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


def _gone(pid: int) -> bool:
    """The process ended (or is a zombie its parent has not reaped yet)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait(cond, timeout_s: float = 30.0, what=None) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time"
                                 + (f" (last: {what()!r})" if what is not None else ""))
        time.sleep(0.02)



def test_tandem_init_bounds_the_pool():
    import tandem
    from tandem.jobs import runtime

    for bad in (-1, 1.5, True):
        with pytest.raises(ConfigError, match=r"tandem.init\(warm_workers="):
            tandem.init(warm_workers=bad)
    tandem.init(num_cpus=2, warm_workers=0)
    try:
        assert runtime.current_service().cluster.warm_pool.max_workers == 0
    finally:
        tandem.shutdown()


def reuse_task(channel):
    import os
    import sys

    import reuse_probe_mod  # the user's module: fresh in every task

    reuse_probe_mod.COUNT += 1
    channel.send(("state", os.getpid(), os.environ.get("JOB_VAR"), os.getcwd(),
                  reuse_probe_mod.COUNT, "LEFT_BEHIND" in os.environ, "/left/behind" in sys.path))
    os.environ["LEFT_BEHIND"] = "1"
    os.chdir("/")
    sys.path.insert(0, "/left/behind")
    return 0


def failing_task(channel):
    import os

    channel.send(("pid", os.getpid()))
    return 3


def test_a_reused_worker_runs_the_next_task_of_its_kind_only_and_clean(tmp_path, monkeypatch):
    """WorkerSpec.reuse_key (TuneConfig(reuse_actors=True)): a process whose task ended well
    runs the next task with the same key, put back clean (environment, working directory,
    sys.path; the user's module imported afresh); never a task of another key or without
    one; after a failed task it exits."""
    (tmp_path / "reuse_probe_mod.py").write_text("COUNT = 0\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=0, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        io = cluster._io_thread()
        w1, out1 = _run(cluster, placement, tmp_path, reuse_task, "a1", reuse_key="k")
        pid = w1.pid
        assert out1 == [("state", pid, "a1", str(tmp_path), 1, False, False)]
        # its task's end reaches the job before the worker says it is back in the pool: on a
        # loaded machine the next task could otherwise be forked afresh
        _wait(lambda: pid in cluster.warm_worker_pids())
        w2, out2 = _run(cluster, placement, tmp_path, reuse_task, "a2", reuse_key="k")
        assert w2.pid == pid and io.reused >= 1  # the same process, as the next job
        assert out2 == [("state", pid, "a2", str(tmp_path), 1, False, False)]
        other, _ = _run(cluster, placement, tmp_path, probe_task, "b", reuse_key="other")
        plain, _ = _run(cluster, placement, tmp_path, probe_task, "c")
        assert pid not in (other.pid, plain.pid)
        failed, out = _run(cluster, placement, tmp_path, failing_task, "f", reuse_key="k",
                           code=3)
        assert out == [("pid", pid)]
        _wait(lambda: _gone(pid))
        assert pid not in cluster.warm_worker_pids()
    finally:
        cluster.shutdown()


def draws_numpy(channel):
    import os

    import numpy as np

    channel.send(("draw", os.getpid(), float(np.random.rand()), float(np.random.normal())))
    return 0


def test_workers_forked_after_numpy_was_imported_draw_their_own_numbers(tmp_path):
    """numpy's global generator is seeded when numpy is imported: with numpy imported in
    the zygote (preloaded here; torch's preload and learned imports bring it too), every
    fork inherited the same state, so trials of a sweep and ranks of a gang drew the same
    "random" numbers (Ray's example ``pbt_function``: 4 trials with identical results).
    Each worker is seeded from the OS, as a fresh process is."""
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=2, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        draws = []
        for i in range(4):  # forked at the start and warm ones, from the same zygote
            _, out = _run(cluster, placement, tmp_path, draws_numpy, f"n{i}",
                          preload=["numpy"])
            draws.append(out[0][2:])
        assert len(set(draws)) == 4, draws
    finally:
        cluster.shutdown()


def draws_torch(channel):
    import os

    import torch

    channel.send(("draw", os.getpid(), torch.initial_seed(), float(torch.rand(1))))
    return 0


def test_workers_forked_after_torch_was_imported_draw_their_own_numbers(tmp_path):
    """torch seeds its default generator from the OS once, as it is imported: forks of a
    zygote that preloaded torch (every torch gang's) drew the same numbers, dropout masks
    and initial weights included, where Ray's worker processes each have their own seed."""
    pytest.importorskip("torch")
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=2, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        draws = []
        for i in range(3):
            _, out = _run(cluster, placement, tmp_path, draws_torch, f"t{i}",
                          preload=["torch"])
            draws.append(out[0][2:])
        assert len({seed for seed, _ in draws}) == 3 and len(set(draws)) == 3, draws
    finally:
        cluster.shutdown()
