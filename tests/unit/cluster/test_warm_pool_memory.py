"""1,000 trivial tasks (500 gangs of two) through one warm pool: the driver, the zygote and
the warm workers keep a flat memory footprint (issue 25's 1,000-trial check, at the cluster
layer: the trials' bookkeeping above it is not what is measured)."""

from __future__ import annotations

import queue
import sys

import cloudpickle
import psutil
import pytest

from tandem.cluster._pool import WarmPoolConfig
from tandem.cluster.base import WorkerSpec
from tandem.cluster.local import LocalCluster

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def trivial(channel):
    channel.send(("result", {"x": 1}))
    return 0


def _by_value(fn) -> bytes:
    """Pickles ``fn`` as a script's function travels (by value), so that no worker imports
    this test module (and pytest with it): the check is about the pool, not imports."""
    module = sys.modules[fn.__module__]
    cloudpickle.register_pickle_by_value(module)
    try:
        return cloudpickle.dumps(fn)
    finally:
        cloudpickle.unregister_pickle_by_value(module)


def _rss_mb(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


def test_memory_stays_flat_across_many_tasks_in_one_pool(tmp_path):
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=2, idle_s=60))
    placement = cluster.place([{"CPU": 1.0}, {"CPU": 1.0}])
    task = _by_value(trivial)
    done: queue.SimpleQueue = queue.SimpleQueue()
    io = cluster._io_thread()
    zygote = io._zygote.pid

    def gang(i: int) -> None:  # two workers at a time, as two concurrent trials
        specs = [WorkerSpec(f"t{i}-{r}", r, str(tmp_path / "log.txt")) for r in range(2)]
        cluster.start_workers(placement, specs, [task, task],
                              lambda w, f: done.put(f[1]) if f[0] == "__exit__" else None)
        assert [done.get(timeout=60), done.get(timeout=60)] == [0, 0]

    try:
        for i in range(50):  # warm-up: imports, buffers, the pool's size
            gang(i)
        driver0, zygote0 = _rss_mb(psutil.Process().pid), _rss_mb(zygote)
        used0 = io.warm_used
        for i in range(50, 500):
            gang(i)
        driver1, zygote1 = _rss_mb(psutil.Process().pid), _rss_mb(zygote)
        assert io.warm_used - used0 >= 450  # half or more of the 900 started warm
        assert driver1 - driver0 < 8, (driver0, driver1)
        assert zygote1 - zygote0 < 2, (zygote0, zygote1)
        warm = [_rss_mb(p) for p in cluster.warm_worker_pids()]
        assert len(warm) <= 2 and all(r < zygote1 + 16 for r in warm), (warm, zygote1)
        assert io._by_id == {} and io._by_pid == {}  # no per-worker state left behind
        assert 0 < cluster.launcher_pss_bytes() < 500 * 2**20  # zygote + idle warm workers
    finally:
        cluster.shutdown()
