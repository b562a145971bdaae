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


def test_learning_stops_at_an_import_that_starts_a_native_thread(tmp_path, monkeypatch):
    """A library's own thread (started below ``threading``, as a native pool is) makes the
    zygote stop learning: a fork carries no thread, and Python 3.12 warns about forking a
    multi-threaded process (seen on a GPU machine)."""
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
