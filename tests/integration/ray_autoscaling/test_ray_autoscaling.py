"""RayCluster(autoscaling=True) on a real Ray autoscaler (Ray's fake multi-node provider:
the autoscaler launches real raylets on this machine when asked for room).

The head runs as ``ray start --head --block`` under this test, so every Ray process (the
nodes the autoscaler launches included) is a descendant and is ended with it; tandem runs
in a subprocess, as this test process may be connected to another Ray cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.timeout(150), pytest.mark.ray_cluster]

DRIVER = textwrap.dedent('''
    import json, sys, tempfile, threading, time
    import ray
    from ray._private.ray_constants import AUTOSCALER_RESOURCE_REQUEST_CHANNEL
    from ray.experimental.internal_kv import _internal_kv_get
    from ray.util.placement_group import placement_group_table

    address = sys.argv[1]
    deadline = time.monotonic() + 60
    while True:  # the head's port is open before its raylet is up
        try:
            ray.init(address=address, log_to_driver=False)
            break
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    import tandem
    from tandem import train
    from tandem.cluster import RayCluster
    from tandem.jobs import runtime
    from tandem.jobs.service import LocalJobService
    from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

    def where(config):
        train.report({"node": ray.get_runtime_context().get_node_id()})

    nodes_before = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    runtime.set_service(LocalJobService(RayCluster(address, autoscaling=True)))
    groups_while_waiting = []

    def watch():  # a job waiting for the autoscaler holds no placement group
        while len(ray.nodes()) == len(nodes_before):
            groups_while_waiting.extend(
                g for g in placement_group_table().values() if g["state"] != "REMOVED")
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    result = DataParallelTrainer(
        where, scaling_config=ScalingConfig(num_workers=2,
                                            resources_per_worker={"CPU": 1, "big": 1}),
        run_config=RunConfig(storage_path=tempfile.mkdtemp()),
    ).fit()
    watcher.join(5)
    time.sleep(1.5)  # the demand of a placed job is withdrawn
    request = json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL) or b"[]")
    tandem.shutdown()
    print("RESULT " + json.dumps({
        "node": result.metrics["node"], "nodes_before": sorted(nodes_before),
        "groups_while_waiting": len(groups_while_waiting), "request_after": request}))
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ray_cli() -> str:
    beside = os.path.join(os.path.dirname(sys.executable), "ray")
    return beside if os.path.exists(beside) else (shutil.which("ray") or "ray")


@pytest.fixture
def autoscaling_head():
    """A head with no room for the job and an autoscaler that can add one 'big' node."""
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="tas", dir="/tmp")  # Ray's socket paths must stay short
    config = {
        "cluster_name": "tandem-test", "max_workers": 1,
        # as Ray's own fake multi-node example: nodes are processes, nothing to set up
        "provider": {"type": "fake_multinode", "gcs_address": f"127.0.0.1:{port}",
                     "use_node_id_as_ip": True, "disable_node_updaters": True,
                     "disable_launch_config_check": True},
        "auth": {"ssh_user": "ubuntu"}, "head_node_type": "ray.head.default",
        "available_node_types": {
            "ray.head.default": {"resources": {}, "node_config": {}, "max_workers": 0},
            "big": {"resources": {"CPU": 2, "big": 2}, "node_config": {},
                    "min_workers": 0, "max_workers": 1},
        },
        "upscaling_speed": 1.0, "idle_timeout_minutes": 5, "docker": {}, "file_mounts": {},
        "cluster_synced_files": [], "file_mounts_sync_continuously": False,
        "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
        "worker_setup_commands": [], "head_start_ray_commands": [],
        "worker_start_ray_commands": [],
    }
    config_path = os.path.join(tmp, "autoscaling.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ, RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1",
               RAY_AUTH_MODE="disabled")  # a private test cluster: no token file to share
    head = subprocess.Popen(
        [_ray_cli(), "start", "--head", "--block", f"--port={port}", "--num-cpus=1",
         f"--autoscaling-config={config_path}", "--include-dashboard=false",
         f"--temp-dir={tmp}", "--disable-usage-stats"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert head.poll() is None, "ray start --head exited"
                assert time.monotonic() < deadline, "the Ray head did not come up"
                time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        tree = [head, *psutil.Process(head.pid).children(recursive=True)] \
            if head.poll() is None else []
        head.send_signal(signal.SIGTERM)  # ray start --block stops its processes
        try:
            head.wait(10)
        except subprocess.TimeoutExpired:
            pass
        _, alive = psutil.wait_procs([p for p in tree if p.pid != head.pid], timeout=2)
        for p in alive:
            try:
                p.kill()
            except psutil.Error:
                pass
        if head.poll() is None:
            head.kill()
            head.wait()
        if os.environ.get("KEEP_RAY_TMP") is None:  # set it to read Ray's logs (monitor.log)
            shutil.rmtree(tmp, ignore_errors=True)


def test_a_job_too_big_for_today_s_nodes_makes_the_autoscaler_add_one(autoscaling_head):
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, autoscaling_head],
        capture_output=True, text=True, timeout=90,
        env=dict(os.environ, RAY_AUTH_MODE="disabled"),
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-2000:] + out.stderr[-3000:]
    got = json.loads(line[len("RESULT "):])
    assert got["node"] not in got["nodes_before"]  # it ran on the node Ray added for it
    assert got["groups_while_waiting"] == 0
    assert got["request_after"] == []  # nothing is left asked of the autoscaler
