"""Gang planning and the shared-storage decision: pure functions, no processes."""

from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.train._internal.gang import (
    hosts,
    plan_gang,
    storage_is_shared_by_env,
    storage_refusal,
    with_local_ranks,
)


def _table(plan):
    return [(p.world_rank, p.bundle_index, p.node_rank, p.local_rank, p.local_world_size)
            for p in plan]


def test_one_node_gang():
    plan = plan_gang(["local"] * 3, ["127.0.0.1"] * 3)
    assert _table(plan) == [(0, 0, 0, 0, 3), (1, 1, 0, 1, 3), (2, 2, 0, 2, 3)]


def test_ranks_grouped_by_node_get_local_and_node_ranks():
    plan = plan_gang(["n1", "n1", "n2", "n2"], ["10.0.0.1"] * 2 + ["10.0.0.2"] * 2)
    assert _table(plan) == [(0, 0, 0, 0, 2), (1, 1, 0, 1, 2), (2, 2, 1, 0, 2), (3, 3, 1, 1, 2)]
    assert [p.node_ip for p in plan] == ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"]


def test_interleaved_nodes_keep_each_rank_on_its_bundle():
    plan = plan_gang(["a", "b", "a"], ["1", "2", "1"])
    assert _table(plan) == [(0, 0, 0, 0, 2), (1, 1, 1, 0, 1), (2, 2, 0, 1, 2)]


def test_nodes_sharing_one_host_are_still_separate_nodes():
    # ray.cluster_utils.Cluster: two raylets, one IP; each is a node to its workers
    plan = plan_gang(["head", "head", "worker", "worker"], ["192.168.1.5"] * 4)
    assert [p.local_rank for p in plan] == [0, 1, 0, 1]
    assert [p.node_rank for p in plan] == [0, 0, 1, 1]
    assert [p.local_world_size for p in plan] == [2, 2, 2, 2]


def test_plan_refuses_mismatched_lists():
    with pytest.raises(ValueError, match="2 node ids but 1 node IPs"):
        plan_gang(["a", "b"], ["1"])


def test_backend_local_ranks_follow_node_ids_not_ips():
    plan = plan_gang(["head", "head", "worker"], ["h"] * 3)
    # a backend that counts by IP would say LOCAL_RANK 2 for rank 2
    envs = [{"RANK": str(r), "LOCAL_RANK": str(r), "LOCAL_WORLD_SIZE": "3"} for r in range(3)]
    out = with_local_ranks(envs, plan)
    assert [e["LOCAL_RANK"] for e in out] == ["0", "1", "0"]
    assert [e["LOCAL_WORLD_SIZE"] for e in out] == ["2", "2", "1"]
    assert [e["RANK"] for e in out] == ["0", "1", "2"]
    assert with_local_ranks([{}, {"X": "1"}], plan[:2]) == [{}, {"X": "1"}]  # backend sets none


def test_hosts_counts_machines_by_address():
    assert hosts(["10.0.0.1", "10.0.0.1"]) == 1
    assert hosts(["10.0.0.1", "10.0.0.2", "10.0.0.1"]) == 2
    assert hosts(["10.0.0.1", ""]) == 2  # an unknown address cannot be shown to be this host
    assert hosts([]) == 0


def _refusal(path: str, ips: list[str], shared: bool = False) -> ConfigError | None:
    return storage_refusal(storage_path=path, node_ips=ips, run_name="run1",
                           num_workers=len(ips), declared_shared=shared)


def test_local_storage_on_one_host_is_allowed_even_over_several_nodes():
    assert _refusal("/tmp/results", ["10.0.0.1"] * 4) is None


def test_local_storage_over_two_hosts_is_refused_with_the_fix():
    err = _refusal("/tmp/results", ["10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"])
    assert isinstance(err, ConfigError)
    msg = str(err)
    assert "Run run1" in msg and "4 workers" in msg and "2 machines" in msg
    assert "10.0.0.1, 10.0.0.2" in msg and "'/tmp/results'" in msg
    assert "s3://" in msg and "TANDEM_STORAGE_IS_SHARED=1" in msg and "STRICT_PACK" in msg


@pytest.mark.parametrize("path", ["file:///tmp/results", "local:///tmp/results"])
def test_local_urls_count_as_local(path):
    assert isinstance(_refusal(path, ["a", "b"]), ConfigError)


def test_remote_urls_and_declared_shared_paths_are_allowed():
    assert _refusal("s3://bucket/runs", ["a", "b"]) is None
    assert _refusal("/nfs/runs", ["a", "b"], shared=True) is None


def test_shared_storage_declaration_is_read_from_the_environment():
    assert storage_is_shared_by_env({"TANDEM_STORAGE_IS_SHARED": "1"})
    assert not storage_is_shared_by_env({"TANDEM_STORAGE_IS_SHARED": "0"})
    assert not storage_is_shared_by_env({})


def test_elastic_target_grows_as_far_as_the_room_and_max_allow():
    from tandem.train._internal.gang import elastic_target

    assert elastic_target(1, 4, 0) == 1
    assert elastic_target(1, 4, 2) == 3
    assert elastic_target(3, 4, 5) == 4
    assert elastic_target(4, 4, 1) == 4


def test_elastic_scaling_config_is_checked_and_read():
    import pytest

    from tandem._core.errors import ConfigError
    from tandem.train import ScalingConfig

    sc = ScalingConfig(num_workers=(2, 4))
    assert sc.is_elastic and (sc.min_workers, sc.max_workers) == (2, 4) and len(sc.bundles) == 4
    assert not ScalingConfig(num_workers=3).is_elastic
    for bad in [(3, 2), (0, 2), (1, 2, 3), (1.5, 2)]:
        with pytest.raises(ConfigError, match="min_workers"):
            ScalingConfig(num_workers=bad)
    with pytest.raises(ConfigError, match="elastic_resize_monitor_interval_s=-1"):
        ScalingConfig(elastic_resize_monitor_interval_s=-1)
