"""The dashboard's cluster view on Ray: one row per Ray node with its capacity."""

from __future__ import annotations

import httpx
import pytest
import ray

from tests.integration.ray.test_ray_server import _start, _stop

pytestmark = [pytest.mark.ray_cluster]


def test_cluster_view_lists_each_ray_node(ray_cluster, tmp_path):
    home, storage = tmp_path / "home", tmp_path / "server"
    home.mkdir()
    storage.mkdir()
    proc, info = _start(str(home), str(storage), "--ray-address", ray_cluster.cluster.address)
    try:
        with httpx.Client(base_url=info["address"],
                          headers={"Authorization": f"Bearer {info['token']}"}) as c:
            view = c.get("/api/dashboard/cluster").json()
        alive = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
        assert {n["node_id"] for n in view["nodes"]} == set(alive)
        for n in view["nodes"]:
            assert n["capacity"]["CPU"] == 2.0
            assert n["ip"] == alive[n["node_id"]]["NodeManagerAddress"]
        assert view["now"]["capacity"]["CPU"] == 4.0 and view["cluster"] == "RayCluster"
    finally:
        _stop(proc)
