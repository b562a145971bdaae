"""The Ray backend on a real two-node Ray cluster (``ray.cluster_utils``, one machine)."""

from __future__ import annotations

import json
import os
import time

import pytest

import tandem
from tandem import train
from tandem._core.errors import ResourcesUnavailableError
from tandem.train import (
    Checkpoint,
    DataParallelTrainer,
    FailureConfig,
    RunConfig,
    ScalingConfig,
)

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.ray, pytest.mark.timeout(180), pytest.mark.ray_cluster]


def _where() -> dict:
    import ray as _ray

    ctx = train.get_context()
    return {
        "rank": ctx.get_world_rank(), "local_rank": ctx.get_local_rank(),
        "local_world_size": ctx.get_local_world_size(), "node_rank": ctx.get_node_rank(),
        "node_id": _ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
        "env_local_rank": os.environ.get("LOCAL_RANK"),
    }


def ddp_train(config):
    import torch
    import torch.distributed as dist

    from tandem.train.torch import prepare_model

    rank = train.get_context().get_world_rank()
    torch.manual_seed(0)  # same initial weights everywhere; the shards differ
    model = prepare_model(torch.nn.Linear(4, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    rows = train.get_dataset_shard("train")
    x = torch.tensor([r[0] for r in rows], dtype=torch.float32)
    y = torch.tensor([r[1] for r in rows], dtype=torch.float32).unsqueeze(1)
    for _ in range(3):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    total = torch.tensor([float(rank)])
    dist.all_reduce(total)
    print(f"rank {rank} done", flush=True)
    out = dict(_where(), world=dist.get_world_size(), allreduce=total.item(),
               weights=[p.detach().flatten().tolist() for p in model.parameters()])
    with open(os.path.join(config["out"], f"rank_{rank}.json"), "w") as f:
        json.dump(out, f)
    train.report({"rank": rank})


def test_ddp_gang_spans_both_nodes(storage, tmp_path):
    tandem.init(cluster="ray")
    rows = [([float(i), float(i % 3), 1.0, -float(i)], float(i % 5)) for i in range(64)]
    from tandem.train.torch import TorchTrainer

    result = TorchTrainer(
        ddp_train,
        train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=4),
        run_config=RunConfig(storage_path=storage, name="ddp"),
        datasets={"train": rows},
    ).fit()
    assert result.error is None
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(4)]
    # Two nodes, two ranks each, ranks grouped by node.
    assert len({r["node_id"] for r in ranks}) == 2
    assert ranks[0]["node_id"] == ranks[1]["node_id"] != ranks[2]["node_id"] == ranks[3]["node_id"]
    assert [r["local_rank"] for r in ranks] == [0, 1, 0, 1]
    assert [r["env_local_rank"] for r in ranks] == ["0", "1", "0", "1"]
    assert [r["node_rank"] for r in ranks] == [0, 0, 1, 1]
    assert [r["local_world_size"] for r in ranks] == [2, 2, 2, 2]
    assert all(r["pid"] != os.getpid() for r in ranks)  # Ray actors, not local processes
    # Gradients really all-reduced: identical weights after different shards, and trained.
    assert all(r["world"] == 4 and r["allreduce"] == 6.0 for r in ranks)
    assert all(r["weights"] == ranks[0]["weights"] for r in ranks)
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    init = [p.detach().flatten().tolist() for p in torch.nn.Linear(4, 1).parameters()]
    assert ranks[0]["weights"] != init
    # Worker output reached the run folder on the driver.
    with open(os.path.join(result.path, "logs", "rank_3.log")) as f:
        assert "rank 3 done" in f.read()


def where_am_i(config):
    with open(os.path.join(config["out"], f"rank_{train.get_context().get_world_rank()}.json"),
              "w") as f:
        json.dump(_where(), f)
    train.report({"ok": 1})


def wait_until_idle(timeout_s: float = 30.0) -> None:
    """Ray's SPREAD is best effort: it spreads when every node has room. Ray's view of the
    CPUs the previous test freed lags a little, so wait until it shows them all free."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources().get("CPU", 0):
        assert time.monotonic() < deadline, f"Ray never became idle: {ray.available_resources()}"
        time.sleep(0.1)


def test_spread_strategy_uses_both_nodes(storage, tmp_path):
    wait_until_idle()
    tandem.init(cluster="ray")
    DataParallelTrainer(
        where_am_i, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, placement_strategy="SPREAD"),
        run_config=RunConfig(storage_path=storage, name="spread"),
    ).fit()
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(2)]
    assert ranks[0]["node_id"] != ranks[1]["node_id"]
    assert [r["node_rank"] for r in ranks] == [0, 1]
    assert [r["local_rank"] for r in ranks] == [0, 0]


def checkpoint_every_rank(config):
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["out"], f"rank_{rank}.json"), "w") as f:
        json.dump(_where(), f)
    for step in range(2):
        d = os.path.join(config["out"], f"ckpt_{rank}_{step}")
        os.makedirs(d)
        with open(os.path.join(d, f"rank_{rank}.txt"), "w") as f:
            f.write(str(step))
        train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))


def test_gang_over_two_nodes_of_one_host_uses_local_storage(storage, tmp_path):
    """Both nodes run on this host, so they share its filesystem: a local storage_path
    is fine although the gang spans two nodes (it was refused when nodes were compared
    by id). Refusing a gang over several hosts is unit-tested (tests/unit/train)."""
    wait_until_idle()
    tandem.init(cluster="ray")
    result = DataParallelTrainer(
        checkpoint_every_rank, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=4),
        run_config=RunConfig(storage_path=storage, name="same_host"),
    ).fit()
    assert result.error is None, result.error
    ranks = [json.loads((tmp_path / f"rank_{r}.json").read_text()) for r in range(4)]
    assert len({r["node_id"] for r in ranks}) == 2  # the gang really spans both nodes
    assert result.metrics["step"] == 1
    assert result.checkpoint.path.startswith(storage)
    # every rank, on either node, wrote its files into the one checkpoint folder
    written = sorted(os.listdir(result.checkpoint.path))
    assert written == [f"rank_{r}.txt" for r in range(4)]


@pytest.mark.parametrize(
    "scaling, match",
    [
        (ScalingConfig(num_workers=5), "CPU=5"),
        (ScalingConfig(num_workers=1, resources_per_worker={"CPU": 3}), "no single node"),
        (ScalingConfig(num_workers=3, placement_strategy="STRICT_SPREAD"), "STRICT_SPREAD"),
        (ScalingConfig(num_workers=1, use_gpu=True), "GPU"),
    ],
)
def test_impossible_job_is_refused(storage, scaling, match):
    tandem.init(cluster="ray")
    trainer = DataParallelTrainer(where_am_i, train_loop_config={"out": storage},
                                  scaling_config=scaling,
                                  run_config=RunConfig(storage_path=storage))
    with pytest.raises(ResourcesUnavailableError, match=match):
        trainer.fit()


def wait_for_file(config):
    deadline = time.monotonic() + 60
    while not os.path.exists(config["flag"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    train.report({"ok": 1})


def test_pending_job_holds_no_placement_group(storage, tmp_path):
    from ray.util.placement_group import placement_group_table

    tandem.init(cluster="ray")
    _wait_for_idle_cluster()
    flag = str(tmp_path / "go")
    big = DataParallelTrainer(
        wait_for_file, train_loop_config={"flag": flag},
        scaling_config=ScalingConfig(num_workers=4),
        run_config=RunConfig(storage_path=storage, name="big"),
    ).fit(block=False)
    deadline = time.monotonic() + 30
    while big.status() != "RUNNING" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert big.status() == "RUNNING"
    small = DataParallelTrainer(
        wait_for_file, train_loop_config={"flag": flag},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="small"),
    ).fit(block=False)
    time.sleep(1.5)  # a few scheduler polls
    assert small.status() == "PENDING"
    live = [g for g in placement_group_table().values() if g["state"] != "REMOVED"]
    assert len(live) == 1 and len(live[0]["bundles"]) == 4  # only the running job's
    open(flag, "w").close()
    assert big.wait(timeout=60).metrics == {"ok": 1}
    assert small.wait(timeout=60).metrics == {"ok": 1}


def _wait_for_idle_cluster(timeout_s: float = 10) -> None:
    """Ray's view of free resources trails the removal of the previous test's groups."""
    deadline = time.monotonic() + timeout_s
    while ray.available_resources().get("CPU", 0) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)


def checkpointing(config):
    ctx = train.get_context()
    rank = ctx.get_world_rank()
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            with open(os.path.join(d, "state.json")) as f:
                start = json.load(f)["step"] + 1
    if rank == 0:
        with open(os.path.join(config["out"], "starts.txt"), "a") as f:
            f.write(f"{start}\n")
    for step in range(start, config["steps"]):
        time.sleep(config["step_s"])
        if rank == 0:
            d = os.path.join(config["out"], f"ckpt_{step}")
            os.makedirs(d, exist_ok=True)
            with open(os.path.join(d, "state.json"), "w") as f:
                json.dump({"step": step}, f)
            train.report({"step": step}, checkpoint=Checkpoint.from_directory(d))
        else:
            train.report({"step": step})


def test_node_loss_resumes_from_checkpoint_on_a_new_node(ray_cluster, storage, tmp_path):
    tandem.init(cluster="ray")
    handle = DataParallelTrainer(
        checkpointing, train_loop_config={"out": str(tmp_path), "steps": 12, "step_s": 0.5},
        scaling_config=ScalingConfig(num_workers=4),
        run_config=RunConfig(storage_path=storage, name="node_loss",
                             failure_config=FailureConfig(max_failures=2)),
    ).fit(block=False)
    seen = []
    for row in handle.results():
        seen.append(row["step"])
        if row["step"] >= 3:
            break
    ray_cluster.replace_worker_node()  # kill the worker node, then add a fresh one
    result = handle.wait(timeout=150)
    starts = [int(s) for s in (tmp_path / "starts.txt").read_text().split()]
    # Rank 0 reported step 3, so every rank had reported step 1 at least (the ranks are at
    # most a step apart): that checkpoint was committed, and the gang resumes at step >= 2.
    assert starts[0] == 0 and len(starts) >= 2 and starts[-1] >= 2
    assert result.metrics["step"] == 11
    assert result.checkpoint is not None and result.checkpoint.path.endswith("checkpoint_000012")
    assert handle.status() == "FINISHED"


def shard_rows(config):
    it = train.get_dataset_shard("train")
    ids = [row["id"] for row in it.iter_rows()]
    train.report({"n": len(ids)})
    with open(os.path.join(config["out"], f"ids_{train.get_context().get_world_rank()}.json"),
              "w") as f:
        json.dump(ids, f)


def test_ray_dataset_is_split_with_streaming_split(storage, tmp_path):
    tandem.init(cluster="ray")
    ds = ray.data.range(64)
    DataParallelTrainer(
        shard_rows, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name="data"),
        datasets={"train": ds},
    ).fit()
    ids = [json.loads((tmp_path / f"ids_{r}.json").read_text()) for r in range(2)]
    assert len(ids[0]) == len(ids[1]) == 32
    assert sorted(ids[0] + ids[1]) == list(range(64))


def trial_fn(config):
    from tandem import tune

    for i in range(3):
        tune.report({"score": config["x"] * (i + 1), "pid": os.getpid()})


def test_tuner_runs_trials_as_jobs_on_ray(storage):
    try:
        from tandem.tune import TuneConfig, Tuner
    except ImportError:
        pytest.skip("Tuner not available yet")
    from tandem import tune

    tandem.init(cluster="ray")
    grid = Tuner(
        trial_fn,
        param_space={"x": tune.grid_search([1, 2, 3, 4])},
        tune_config=TuneConfig(metric="score", mode="max"),
        run_config=RunConfig(storage_path=storage, name="tune_on_ray"),
    ).fit()
    assert len(grid) == 4 and grid.num_errors == 0
    assert grid.get_best_result().metrics["score"] == 12
    assert all(r.metrics["pid"] != os.getpid() for r in grid)


def nested_driver(config):
    from tandem import tune

    result = DataParallelTrainer(
        where_am_i, train_loop_config={"out": config["out"]},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=config["storage"], name="inner"),
    ).fit()
    tune.report({"inner_ok": result.metrics["ok"]})


def test_trial_that_fits_a_trainer_keeps_running_while_lending(storage, tmp_path):
    try:
        from tandem.tune import TuneConfig, Tuner
    except ImportError:
        pytest.skip("Tuner not available yet")
    tandem.init(cluster="ray")
    grid = Tuner(
        nested_driver,
        param_space={"out": str(tmp_path), "storage": storage},
        tune_config=TuneConfig(num_samples=1),
        run_config=RunConfig(storage_path=storage, name="nested_on_ray"),
    ).fit()
    assert grid.num_errors == 0, [r.error for r in grid]
    assert next(iter(grid)).metrics["inner_ok"] == 1
    assert len(list(tmp_path.glob("rank_*.json"))) == 2


def nested_two_worker_driver(config):
    from tandem import tune

    out = os.path.join(config["out"], f"t{config['i']}")
    os.makedirs(out, exist_ok=True)
    first_attempt = os.path.join(out, "first_attempt")
    if os.path.exists(first_attempt):
        # Restarted: wait until every trial's new driver holds its new bundle (the cluster
        # is full) before fitting, so the nested jobs can only run if the drivers lend.
        open(os.path.join(config["out"], f"restarted_{config['i']}"), "w").close()
        deadline = time.monotonic() + 60
        while len([p for p in os.listdir(config["out"]) if p.startswith("restarted_")]) < 4:
            assert time.monotonic() < deadline, "not every trial restarted"
            time.sleep(0.05)
    result = DataParallelTrainer(
        where_am_i, train_loop_config={"out": out},
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=config["storage"], name=f"inner_{config['i']}"),
    ).fit()
    if not os.path.exists(first_attempt):
        open(first_attempt, "w").close()
        raise RuntimeError("the trial's driver fails once, after its nested job")
    tune.report({"inner_ok": result.metrics["ok"]})


def test_trials_that_fit_trainers_finish_on_a_saturated_ray_cluster(storage, tmp_path):
    """4 trial drivers hold all 4 CPUs of the 2-node cluster; each fits a 2-worker job.

    Each trial lends its bundle to its nested job while it waits on it (its actor lives
    on outside the released placement group), so every nested gang gets placed. Each
    driver then fails once: it is placed anew and lends its new bundle again.
    """
    from tandem import tune
    from tandem.tune import TuneConfig, Tuner

    tandem.init(cluster="ray")
    grid = Tuner(
        nested_two_worker_driver,
        param_space={"i": tune.grid_search([0, 1, 2, 3]), "storage": storage,
                     "out": str(tmp_path)},
        tune_config=TuneConfig(),  # no max_concurrent_trials: all four drivers start at once
        run_config=RunConfig(storage_path=storage, name="nested_saturated",
                             failure_config=FailureConfig(max_failures=1)),
    ).fit()
    assert grid.num_errors == 0, [r.error for r in grid]
    assert sorted(r.metrics["inner_ok"] for r in grid) == [1, 1, 1, 1]
    assert all(len(list((tmp_path / f"t{i}").glob("rank_*.json"))) == 2 for i in range(4))


def report_devices(config):
    rank = train.get_context().get_world_rank()
    with open(os.path.join(config["out"], f"rank_{rank}.json"), "w") as f:
        json.dump({"visible": os.environ["CUDA_VISIBLE_DEVICES"],
                   "node_id": ray.get_runtime_context().get_node_id()}, f)
    train.report({"ok": 1})


def _devices_seen(out) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(out.glob("rank_*.json"))]


def test_gpu_workers_see_the_devices_ray_gave_their_bundles(ray_cluster, storage, tmp_path):
    """A node Ray believes has 2 GPUs (Ray assigns device ids the same way without the
    hardware): 4 workers at half a GPU each share them two by two; whole-GPU workers get one
    each; CPU-only workers see none. The actors hold no Ray resources: the ids come from
    their bundles."""
    gpu_node = ray_cluster.cluster.add_node(num_cpus=4, num_gpus=2)
    outs = {name: tmp_path / name for name in ("half", "whole", "cpu")}
    for out in outs.values():
        out.mkdir()
    try:
        ray_cluster.cluster.wait_for_nodes()
        tandem.init(cluster="ray")
        for name, scaling in [
            ("half", ScalingConfig(num_workers=4, resources_per_worker={"CPU": 1, "GPU": 0.5})),
            ("whole", ScalingConfig(num_workers=2, use_gpu=True)),
            ("cpu", ScalingConfig(num_workers=2)),
        ]:
            DataParallelTrainer(
                report_devices, train_loop_config={"out": str(outs[name])},
                scaling_config=scaling, run_config=RunConfig(storage_path=storage, name=name),
            ).fit()
        gpu_node_id = gpu_node.node_id
    finally:
        tandem.shutdown()
        ray_cluster.cluster.remove_node(gpu_node)
    half, whole, cpu = (_devices_seen(outs[n]) for n in ("half", "whole", "cpu"))
    assert sorted(r["visible"] for r in half) == ["0", "0", "1", "1"]
    assert sorted(r["visible"] for r in whole) == ["0", "1"]
    assert {r["node_id"] for r in half + whole} == {gpu_node_id}
    assert [r["visible"] for r in cpu] == ["", ""]


def test_another_address_while_connected_is_named_in_a_warning(caplog):
    from tandem.cluster.ray import RayCluster

    current = ray.get_runtime_context().gcs_address
    with caplog.at_level("WARNING", logger="tandem.cluster.ray"):
        RayCluster(address=current)
        assert not caplog.records
        RayCluster(address="10.9.9.9:6379")
    assert "10.9.9.9:6379" in caplog.text and current in caplog.text
    assert "ray.shutdown()" in caplog.text


def torch_fit_fn(config):
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    train.report({"sum": t.item()})


def test_successful_runs_leave_no_worker_died_errors_on_the_console(storage, capfd):
    """Ray prints "A worker died or was killed ..." on the driver for an actor that exits
    behind its back; a run that succeeds lets its workers end by themselves first."""
    from tandem.train.torch import TorchTrainer

    tandem.init(cluster="ray")
    for i in range(4):
        result = TorchTrainer(torch_fit_fn, scaling_config=ScalingConfig(num_workers=2),
                              run_config=RunConfig(storage_path=storage, name=f"quiet_{i}")).fit()
        assert result.metrics["sum"] == 2
    time.sleep(2)  # Ray's error messages reach the driver asynchronously
    captured = capfd.readouterr()
    err = captured.out + captured.err
    assert "worker died" not in err.lower(), err[-2000:]
