"""Elastic gangs on a real two-node Ray cluster (``ray.cluster_utils``): the gang starts at
what fits, shrinks instead of waiting when a node is removed, grows back at a checkpoint
when a node is added; the data is re-split by the new size and ``training_iteration``
goes on from the checkpoint."""

from __future__ import annotations

import os
import time

import pytest

import tandem
from tandem import train
from tandem.train import (
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)
from tests.helpers.steps import report_step, resume_step

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.ray_cluster]

ROWS = 40


def elastic_loop(config):
    ctx = train.get_context()
    shard = train.get_dataset_shard("train")
    for step in range(resume_step(train), config["steps"]):
        if os.path.exists(config["hold"]) and step >= config["hold_at"]:
            while os.path.exists(config["hold"]):  # the test resizes the cluster meanwhile
                time.sleep(0.05)
        time.sleep(config["step_s"])
        report_step(train, {"step": step, "world": ctx.get_world_size(), "rows": len(shard),
                            "node": ray.get_runtime_context().get_node_id()},
                    step + 1 if step % 2 == 1 else None)


def _wait_for(probe, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not probe():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_an_elastic_gang_follows_nodes_removed_and_added(ray_cluster, storage, tmp_path):
    # Each worker needs a whole node (2 CPUs); the gang wants 3 but the cluster has 2 nodes.
    _wait_for(lambda: ray.available_resources().get("CPU", 0) >= 4, 20, "an idle cluster")
    tandem.init(cluster="ray")
    handle = DataParallelTrainer(
        elastic_loop,
        train_loop_config={"steps": 40, "step_s": 0.1, "hold": str(tmp_path / "hold"),
                           "hold_at": 6},
        scaling_config=ScalingConfig(num_workers=(1, 3), resources_per_worker={"CPU": 2},
                                     elastic_resize_monitor_interval_s=0.3),
        run_config=RunConfig(storage_path=storage, name="elastic_ray",
                             failure_config=FailureConfig(max_failures=1)),
        datasets={"train": list(range(ROWS))},
    ).fit(block=False)
    rows = handle.results()
    first = next(rows)
    assert first["world"] == 2  # started with what fits: 2 of 3 workers, one per node
    job = handle.job  # type: ignore[attr-defined]
    # a checkpoint of the 2-worker gang is committed (every rank reported it)
    _wait_for(lambda: job.last_checkpoint_at is not None, 60, "a committed checkpoint")
    ray_cluster.cluster.remove_node(ray_cluster.worker_node, allow_graceful=False)
    for row in rows:  # shrinks to the one node left instead of waiting for two
        if row["world"] == 1:
            break
    (tmp_path / "hold").touch()  # hold the gang until the node is up (no race to the end)
    ray_cluster.worker_node = ray_cluster.cluster.add_node(num_cpus=2)
    ray_cluster.cluster.wait_for_nodes()
    _wait_for(lambda: ray.available_resources().get("CPU", 0) >= 2, 30, "the new node")
    (tmp_path / "hold").unlink()
    result = handle.wait(timeout=180)
    assert result.error is None, result.error
    df = result.metrics_dataframe
    # training_iteration goes on from each checkpoint: one row per step, in order
    assert list(df["step"]) == list(range(40))
    assert list(df["training_iteration"]) == list(range(1, 41))
    worlds = list(df["world"])
    changes = [w for i, w in enumerate(worlds) if i == 0 or w != worlds[i - 1]]
    assert changes == [2, 1, 2], worlds  # what fit, shrunk on node loss, grew on node add
    assert sorted(set(zip(df["world"], df["rows"]))) == [(1, ROWS), (2, ROWS // 2)]
    grown_at = max(i for i, w in enumerate(worlds) if i and w == 2 and worlds[i - 1] == 1)
    assert df["step"].iloc[grown_at] % 2 == 0  # the bigger gang began at a checkpoint
    # the shrunk gang ran on the node that was left
    assert set(df["node"][df["world"] == 1]) == {ray_cluster.cluster.head_node.node_id}
    why = [r for s, r in job.reasons if s == "RESTARTING"]
    assert any("growing from 1 to 2 workers" in (r or "") for r in why), why
    assert handle.status() == "FINISHED"
