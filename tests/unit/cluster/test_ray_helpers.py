"""The Ray backend's pure helpers and its configuration errors (no Ray cluster needed)."""

from __future__ import annotations

import pytest

import tandem
from tandem._core.errors import ConfigError
from tandem.cluster import LocalCluster, make_cluster


def test_ranks_are_grouped_by_node():
    from tandem.cluster.ray._placement import group_by_node as _group_by_node

    bundles = [{"CPU": 1.0}] * 5
    assert _group_by_node(["a", "b", "a", "b", "a"], bundles) == (0, 2, 4, 1, 3)
    assert _group_by_node(["a", "a", "b"], bundles[:3]) == (0, 1, 2)


def test_different_bundles_keep_their_ranks():
    from tandem.cluster.ray._placement import group_by_node as _group_by_node

    assert _group_by_node(["a", "b", "a"], [{"CPU": 2.0}, {"CPU": 1.0}, {"CPU": 1.0}]) == (0, 1, 2)


def test_ray_bundles_are_never_empty():
    from tandem.cluster.ray._placement import ray_bundle as _ray_bundle

    assert _ray_bundle({"CPU": 0.0}) == {"CPU": 0.01}
    assert _ray_bundle({"CPU": 2.0, "GPU": 0.5}) == {"CPU": 2.0, "GPU": 0.5}


def test_make_cluster_local_and_errors():
    assert isinstance(make_cluster("local", num_cpus=2), LocalCluster)
    with pytest.raises(ConfigError, match="use one of local, ray"):
        make_cluster("slurm")
    with pytest.raises(ConfigError, match="Ray's own"):
        make_cluster("ray", "auto", num_cpus=4)


def test_init_ray_address_needs_cluster_ray():
    with pytest.raises(ConfigError, match="cluster='ray'"):
        tandem.init(ray_address="auto")
    assert not tandem.is_initialized()


def test_a_group_just_removed_counts_as_free_while_rays_view_trails(monkeypatch):
    """An elastic resize gives its placement group back and at once asks for a bigger one:
    Ray's free resources still show the old group held, so ``place`` must count it free
    for ``place_timeout_s`` (then trust Ray's view again)."""
    import threading

    from tandem.cluster.base import Placement
    from tandem.cluster.ray import _cluster

    cluster = _cluster.RayCluster.__new__(_cluster.RayCluster)  # no Ray connection needed
    cluster._lock = threading.Lock()
    cluster._pgs = {"pg1": object()}
    cluster._released = []
    cluster.place_timeout_s = 2.0
    monkeypatch.setattr(cluster, "available", lambda: {"CPU": 1.0})
    monkeypatch.setattr(_cluster, "remove_pg", lambda pg: None)
    placement = Placement(placement_id="pg1", bundles=({"CPU": 2.0}, {"CPU": 2.0}),
                          node_ids=("a", "b"), node_ips=("", ""), gpu_ids=((), ()),
                          strategy="PACK")
    cluster.release(placement)
    assert cluster._available_with_released() == {"CPU": 5.0}
    cluster.release(placement)  # released twice (already gone): counted once
    cluster._released = [(t - 2.5, r) for t, r in cluster._released]  # 2.5 s later
    assert cluster._available_with_released() == {"CPU": 1.0}
    assert cluster._released == []
