"""Learned imports (``_worker_main.ImportLearner`` -> ``_IOThread.learn``): the installed
modules a job's workers imported are imported by the zygote, so the workers forked next (a
gang restarted after a crash, the next trial) start with them; the user's own modules never
are. Events, not timings: each step waits for the state it needs."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from tandem.cluster._pool import WarmPoolConfig
from tandem.cluster.local import LocalCluster
from tests.unit.cluster.test_warm_pool import _run, _wait


def imports_idna_and_user_module(channel):
    import sys

    import idna  # noqa: F401 - installed, not imported by the zygote: learned
    import learned_probe_user  # noqa: F401 - the user's own module: never learned

    channel.send(("had", "idna" in sys.modules))
    return 0


def probe(channel):
    import sys

    channel.send(("had", "idna" in sys.modules, "learned_probe_user" in sys.modules))
    return 0


def test_the_next_worker_starts_with_what_the_last_one_imported(tmp_path, monkeypatch):
    (tmp_path / "learned_probe_user.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=1, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        io = cluster._io_thread()
        _, out = _run(cluster, placement, tmp_path, probe, "before")
        assert out == [("had", False, False)]
        before = io._generation
        _run(cluster, placement, tmp_path, imports_idna_and_user_module, "learner")
        assert "idna" in io.learned and "learned_probe_user" not in io.learned
        # the zygote imported it (a round later than before: learn_outstanding stays 0
        # until the pool's thread sends the round) and a warm worker of that round is ready
        _wait(lambda: io._generation > before and io.learn_outstanding == 0 and any(
            w.generation == io._generation for w in list(io._warm_idle.values())))
        used = io.warm_used
        _, out = _run(cluster, placement, tmp_path, probe, "after")
        assert out == [("had", True, False)] and io.warm_used == used + 1
    finally:
        cluster.shutdown()


def test_learning_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("TANDEM_LEARN_IMPORTS", "0")
    (tmp_path / "learned_probe_user.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=1, idle_s=60))
    try:
        placement = cluster.place([{"CPU": 1.0}])
        _run(cluster, placement, tmp_path, imports_idna_and_user_module, "learner")
        assert cluster._io_thread().learned == []
    finally:
        cluster.shutdown()


def crash_once_loop(config):
    """Rank 1 of the first attempt imports ``idna`` (as DDP's optimizer pulls in
    ``torch._dynamo``), reports, then dies once the driver says the zygote learned it; the
    restarted ranks say whether they started with it."""
    import sys

    from tandem import train

    had = "idna" in sys.modules
    rank = train.get_context().get_world_rank()
    marker = Path(config["dir"]) / "killed"
    if marker.exists():
        Path(config["dir"], f"restarted-{rank}").write_text(str(had))
        train.report({"restarted": 1})
        return
    import idna  # noqa: F401

    train.report({"restarted": 0})  # the learned imports travel ahead of this report
    if rank == 1:
        go = Path(config["dir"]) / "go"
        _wait(go.exists, 120)
        marker.write_text("")
        os.kill(os.getpid(), 9)
    _wait(lambda: False, 120)  # rank 0 waits for the gang's failure


@pytest.mark.slow
def test_a_gang_restarted_after_a_kill_starts_with_the_learned_imports(tmp_path):
    import tandem
    from tandem.jobs import runtime
    from tandem.train import DataParallelTrainer, FailureConfig, RunConfig, ScalingConfig

    tandem.init(num_cpus=2, warm_workers=2)
    try:
        trainer = DataParallelTrainer(
            crash_once_loop, train_loop_config={"dir": str(tmp_path)},
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(name="learned", storage_path=str(tmp_path / "runs"),
                                 failure_config=FailureConfig(max_failures=1)))
        box: dict = {}
        fit = threading.Thread(target=lambda: box.update(result=trainer.fit()))
        fit.start()
        io = runtime.current_service().cluster._io_thread()
        # two warm workers forked after the zygote imported what rank 1 imported
        _wait(lambda: "idna" in io.learned and io.learn_outstanding == 0 and sum(
            w.generation == io._generation and w.modules >= {"idna"}
            for w in list(io._warm_idle.values())) >= 2, 120)
        (tmp_path / "go").write_text("")
        fit.join(180)
        assert not fit.is_alive()
        assert box["result"].error is None and box["result"].metrics["restarted"] == 1
        assert {(tmp_path / f"restarted-{r}").read_text() for r in (0, 1)} == {"True"}
    finally:
        tandem.shutdown()


def test_the_pool_keeps_under_its_memory_bound(tmp_path, monkeypatch):
    from tandem._core.errors import ConfigError

    for bad in (0, -5, True, "big"):
        with pytest.raises(ConfigError, match="max_pss_mb"):
            WarmPoolConfig(max_pss_mb=bad)
    monkeypatch.setenv("TANDEM_WARM_POOL_MB", "lots")
    with pytest.raises(ConfigError, match="TANDEM_WARM_POOL_MB='lots'"):
        WarmPoolConfig()
    monkeypatch.setenv("TANDEM_WARM_POOL_MB", "123")
    assert WarmPoolConfig().max_pss_mb == 123
    monkeypatch.delenv("TANDEM_WARM_POOL_MB")
    assert WarmPoolConfig().max_pss_mb == 500

    # A bound the zygote alone exceeds: no warm worker is kept, nothing more is learned.
    (tmp_path / "learned_probe_user.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    cluster = LocalCluster(num_cpus=2, warm_pool=WarmPoolConfig(max_workers=2, idle_s=60,
                                                                max_pss_mb=1))
    try:
        assert cluster.warm_pool_info() is None  # nothing started yet
        placement = cluster.place([{"CPU": 1.0}])
        io = cluster._io_thread()
        _run(cluster, placement, tmp_path, probe, "a")
        _wait(lambda: io._warm_cap == 0 and not io._learning and not io._warm_idle
              and not io._warm_pending, 60)
        used, learned = io.warm_used, list(io.learned)
        _, out = _run(cluster, placement, tmp_path, imports_idna_and_user_module, "b")
        assert io.warm_used == used and io.learned == learned  # forked; learned nothing
        assert not io._warm_pending and not io._warm_idle  # none forked ahead either
        info = cluster.warm_pool_info()
        assert info is not None and info["pss_mb"] > 1 and info["max_pss_mb"] == 1
        assert info["warm_workers"] == 0 and info["learning"] is False
    finally:
        cluster.shutdown()


def test_tandem_init_bounds_the_pool_memory():
    import tandem
    from tandem._core.errors import ConfigError
    from tandem.jobs import runtime

    for bad in (0, -1, True, "1G"):
        with pytest.raises(ConfigError, match=r"tandem.init\(warm_pool_mb="):
            tandem.init(warm_pool_mb=bad)
    tandem.init(num_cpus=2, warm_pool_mb=300)
    try:
        assert runtime.current_service().cluster.warm_pool.max_pss_mb == 300
    finally:
        tandem.shutdown()


def test_learning_stops_at_an_import_that_starts_a_python_thread(tmp_path, monkeypatch):
    """A thread started below ``threading`` (``_thread``, as a library's pool may be) makes
    the zygote stop learning: a fork carries no thread, and Python 3.12 warns about forking
    a multi-threaded process (seen on a GPU machine)."""
    from tandem.cluster import _wire
    from tandem.cluster._zygote import _Zygote

    (tmp_path / "native_thread_probe.py").write_text(
        "import _thread, time\n_thread.start_new_thread(time.sleep, (10,))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    inp, _in_w = os.pipe()
    out_r, out = os.pipe()
    z = _Zygote(inp, out)
    before = threading.active_count()
    z._learning.extend(["native_thread_probe", "json"])
    z._learn_one()
    assert threading.active_count() == before  # invisible to threading's own count
    assert z._stop_learning is not None and "native_thread_probe" in z._stop_learning
    assert not z._learning  # the rest is dropped
    msgs = list(_wire.FrameReader().feed(os.read(out_r, 1 << 16)))
    assert msgs[0][0] == "learned" and msgs[0][1] == 2
    for fd in (inp, _in_w, out_r, out, z._wake_r, z._wake_w):
        os.close(fd)


# A learned import in a fresh zygote-like process: (threads before, after, why it stopped).
_LEARN_IN_A_FRESH_PROCESS = """
import json, os, sys
from tandem.cluster._zygote import _Zygote
inp, _w = os.pipe(); _r, out = os.pipe()
z = _Zygote(inp, out)
before = len(os.listdir("/proc/self/task"))
z._learning.extend(sys.argv[1:])
while z._learning:
    z._learn_one()
print(json.dumps([before, len(os.listdir("/proc/self/task")), z._stop_learning]))
"""


def _learn_fresh(tmp_path, *names):
    import json
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run([sys.executable, "-c", _LEARN_IN_A_FRESH_PROCESS, *names], env=env,
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are read from /proc")
def test_learning_stops_at_a_native_thread_of_an_unknown_library(tmp_path):
    """A thread with no Python state, started by a library tandem knows nothing of (here
    libc's ``sleep`` run by ``pthread_create`` through ctypes), stops the learning too."""
    (tmp_path / "native_probe.py").write_text(
        "import ctypes\n"
        "libc = ctypes.CDLL('libc.so.6')\n"
        "t = ctypes.c_ulong()\n"
        "sleep = ctypes.cast(libc.sleep, ctypes.c_void_p)\n"
        "assert libc.pthread_create(ctypes.byref(t), None, sleep, ctypes.c_void_p(30)) == 0\n")
    before, after, why = _learn_fresh(tmp_path, "native_probe", "json")
    assert after == before + 1
    assert why is not None and "'native_probe' started 1 native thread" in why


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are read from /proc")
def test_fork_safe_native_threads_do_not_stop_the_learning(tmp_path):
    """pyarrow (which pandas and scikit-learn >= 1.9 import) starts jemalloc's background
    thread, numpy and scipy an OpenBLAS thread per extra core: each library starts them
    again after a fork, so the zygote learns on (it stopped at scikit-learn's first module
    before, and the digits example's restarted gang imported it all again)."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("scipy.linalg")
    before, after, why = _learn_fresh(tmp_path, "pyarrow", "scipy.linalg", "json")
    assert after > before  # the imports did start threads: the check is not vacuous
    assert why is None


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="threads are read from /proc")
def test_a_worker_forked_after_fork_safe_threads_uses_their_libraries(tmp_path):
    """The claim above, on a real fork of a process whose learned pyarrow and scipy
    started their threads: the child runs OpenBLAS's and Arrow's thread pools to the end."""
    pytest.importorskip("pyarrow")
    pytest.importorskip("scipy.linalg")
    import subprocess
    import sys

    code = (
        "import os, sys\n"
        "import pyarrow as pa, pyarrow.compute as pc, numpy as np, scipy.linalg\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    a = np.random.rand(600, 600); scipy.linalg.lu_factor(a @ a)\n"
        "    arr = pa.array(np.random.rand(1_000_000)); pc.sort_indices(arr); pc.sum(arr)\n"
        "    os._exit(7)\n"
        "print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert out.strip() == "7"
