"""A real two-node Ray cluster on this machine for the Ray backend's tests.

One ``ray.cluster_utils.Cluster`` (a head and a worker node, 2 CPUs each) serves every test
in this folder; its raylets and GCS are children of the test process, so the root
conftest's per-test process check is replaced here by Ray-aware hygiene: after each test,
no tandem placement group is left and no ``_TandemWorker`` actor or process is alive; at
the end, no Ray process is left.
"""

from __future__ import annotations

import time

import psutil
import pytest

import tandem
from tests.processes import _alive

try:
    import ray
except ImportError:  # the Ray backend is an optional extra: tandem-ml[ray]
    ray = None
    collect_ignore_glob = ["test_*.py"]

NODE_CPUS = 2


class TwoNodeRay:
    """The cluster object plus the node that tests may remove (and replace)."""

    def __init__(self) -> None:
        from ray.cluster_utils import Cluster

        self.cluster = Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": NODE_CPUS,
                "include_dashboard": False,
                # Notice a lost node within ~2 s instead of ~30 s.
                "_system_config": {
                    "health_check_initial_delay_ms": 0,
                    "health_check_period_ms": 500,
                    "health_check_failure_threshold": 4,
                },
            },
        )
        self.worker_node = self.cluster.add_node(num_cpus=NODE_CPUS)
        self.cluster.wait_for_nodes()
        ray.init(address=self.cluster.address, log_to_driver=False)

    def replace_worker_node(self) -> None:
        """Kills the worker node (no graceful drain, as a crash) and adds a new one."""
        self.cluster.remove_node(self.worker_node, allow_graceful=False)
        self.worker_node = self.cluster.add_node(num_cpus=NODE_CPUS)

    def shutdown(self) -> None:
        ray.shutdown()
        self.cluster.shutdown()


@pytest.fixture(scope="package")
def ray_cluster():
    before = {p.pid for p in _descendants()}
    c = TwoNodeRay()
    yield c
    tandem.shutdown()
    c.shutdown()
    left = _wait_gone(lambda: [p for p in _descendants() if p.pid not in before], 20)
    assert not left, f"Ray processes left behind: {[_cmd(p) for p in left]}"


@pytest.fixture(autouse=True)
def _no_leftover_processes(ray_cluster, monkeypatch):
    """Overrides the root conftest's check (Ray's own daemons outlive a test by design)."""
    # Every node runs on this host: a local storage path is shared without saying so.
    monkeypatch.delenv("TANDEM_STORAGE_IS_SHARED", raising=False)
    yield
    tandem.shutdown()
    groups = _wait_gone(_live_groups, 10)
    actors = _wait_gone(_live_tandem_actors, 10)
    # a dead actor's process exits a moment after Ray marks it DEAD; at load 10 that took
    # over 10 s once
    procs = _wait_gone(lambda: [p for p in _descendants() if "_TandemWorker" in _cmd(p)], 30)
    assert not groups, f"placement groups left behind: {groups}"
    assert not actors, f"tandem actors still alive: {actors}"
    assert not procs, f"tandem worker processes left behind: {[_cmd(p) for p in procs]}"


def _live_groups() -> list:
    from ray.util.placement_group import placement_group_table

    return [pg for pg in placement_group_table().values() if pg["state"] != "REMOVED"]


def _live_tandem_actors() -> list:
    from ray._private.state import actors

    return [a for a in actors().values()
            if a.get("State") != "DEAD" and "_TandemWorker" in str(a.get("ActorClassName", ""))]


def _wait_gone(probe, timeout_s: float) -> list:
    deadline = time.monotonic() + timeout_s
    while True:
        left = probe()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def _descendants() -> list[psutil.Process]:
    try:
        return [p for p in psutil.Process().children(recursive=True) if _alive(p)]
    except psutil.Error:
        return []


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:160]
    except psutil.Error:
        return "?"
