"""RayCluster(autoscaling=True) on a real Ray autoscaler (Ray's fake multi-node provider:
the autoscaler launches real raylets on this machine when asked for room).

The head runs as ``ray start --head --block`` under this test (tests/ray_head.py), so every Ray process (the
nodes the autoscaler launches included) is a descendant and is ended with it; tandem runs
in a subprocess, as this test process may be connected to another Ray cluster.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap

import pytest

from tests.ray_head import port_outside_ephemeral_range, ray_head

pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.timeout(150), pytest.mark.ray_cluster]

DRIVER = textwrap.dedent('''
    import json, sys, threading, time
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
        run_config=RunConfig(storage_path=sys.argv[2]),
    ).fit()
    watcher.join(5)
    time.sleep(1.5)  # the demand of a placed job is withdrawn
    request = json.loads(_internal_kv_get(AUTOSCALER_RESOURCE_REQUEST_CHANNEL) or b"[]")
    tandem.shutdown()
    print("RESULT " + json.dumps({
        "node": result.metrics["node"], "nodes_before": sorted(nodes_before),
        "groups_while_waiting": len(groups_while_waiting), "request_after": request}))
''')


@pytest.fixture
def autoscaling_head():
    """A head with no room for the job and an autoscaler that can add one 'big' node."""
    port = port_outside_ephemeral_range()
    config_dir = tempfile.mkdtemp(prefix="tasc", dir="/tmp")
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
    config_path = os.path.join(config_dir, "autoscaling.json")
    with open(config_path, "w") as f:
        json.dump(config, f)
    env = dict(os.environ, RAY_FAKE_CLUSTER="1", AUTOSCALER_UPDATE_INTERVAL_S="1",
               RAY_AUTH_MODE="disabled")  # a private test cluster: no token file to share
    try:  # KEEP_RAY_TMP=1 keeps Ray's folder (its logs: monitor.log)
        with ray_head(["--num-cpus=1", f"--autoscaling-config={config_path}",
                       "--include-dashboard=false"], env=env, port=port, prefix="tas",
                      up_within_s=60, keep_tmp=os.environ.get("KEEP_RAY_TMP") is not None
                      ) as address:
            yield address
    finally:
        shutil.rmtree(config_dir, ignore_errors=True)


def test_a_job_too_big_for_today_s_nodes_makes_the_autoscaler_add_one(autoscaling_head,
                                                                     tmp_path):
    out = subprocess.run(
        [sys.executable, "-c", DRIVER, autoscaling_head, str(tmp_path / "storage")],
        capture_output=True, text=True, timeout=90,
        env=dict(os.environ, RAY_AUTH_MODE="disabled"),
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stdout[-2000:] + out.stderr[-3000:]
    got = json.loads(line[len("RESULT "):])
    assert got["node"] not in got["nodes_before"]  # it ran on the node Ray added for it
    assert got["groups_while_waiting"] == 0
    assert got["request_after"] == []  # nothing is left asked of the autoscaler
