"""Issue 21, item 5: a ``ray.data.Dataset`` given to a trainer on the local cluster (no
``tandem.init(cluster="ray")``): tandem starts the Ray instance Ray Data needs, quietly, the
workers get Ray Data's own streaming split (``get_dataset_shard`` -> ``DataIterator``), and
the instance is shut down once the run ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import tandem
from tandem import train
from tandem.train import DataConfig, RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer

ray = pytest.importorskip("ray")

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow, pytest.mark.ray_cluster]


def loop(config):
    import torch

    rank = train.get_context().get_world_rank()
    it = train.get_dataset_shard("train")
    epochs = []
    for _ in range(2):  # each pass over a streaming split is one epoch
        ids = []
        for batch in it.iter_torch_batches(batch_size=8):
            assert isinstance(batch["id"], torch.Tensor)
            ids += batch["id"].tolist()
        epochs.append(ids)
    valid = [int(b["id"][i]) for b in train.get_dataset_shard("valid").iter_batches(
        batch_size=5, batch_format="numpy") for i in range(len(b["id"]))]
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump({"epochs": epochs, "valid": valid, "kind": type(it).__name__}, f)
    train.report({"rows": len(epochs[0])})


def _fit(storage, out, name, train_ds, valid_ds):
    return TorchTrainer(
        loop, train_loop_config={"out": str(out)},
        datasets={"train": train_ds, "valid": valid_ds},
        dataset_config=DataConfig(datasets_to_split=["train"]),
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, name=name, verbose=0),
    ).fit()


def _check_shards(out):
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    for s in seen:
        assert s["kind"] == "StreamSplitDataIterator"
        assert len(s["epochs"][0]) == len(s["epochs"][1]) == 32
        assert sorted(s["valid"]) == list(range(10))  # not split: every worker reads it all
    for epoch in (0, 1):  # each epoch: disjoint shards that together hold every row
        a, b = (set(s["epochs"][epoch]) for s in seen)
        assert not a & b and sorted(a | b) == list(range(64))


def test_ray_dataset_is_split_per_worker_on_the_local_cluster(storage, tmp_path, capfd):
    tandem.init(num_cpus=2)
    train_ds, valid_ds = ray.data.range(64), ray.data.range(10)  # Ray Data starts Ray here
    try:
        # 1. the user's Ray instance (started by ray.data): used, and left running
        assert ray.is_initialized()
        (tmp_path / "a").mkdir()
        result = _fit(storage, tmp_path / "a", "users_ray", train_ds, valid_ds)
        assert result.error is None and result.metrics["rows"] == 32
        _check_shards(tmp_path / "a")
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    capfd.readouterr()
    # 2. no Ray instance at fit(): tandem starts one, quietly, and shuts it down after
    auth = os.environ.pop("RAY_AUTH_MODE", None)  # as in a fresh process
    (tmp_path / "b").mkdir()
    try:
        result = _fit(storage, tmp_path / "b", "tandems_ray", train_ds, valid_ds)
    finally:
        ray.shutdown()  # (only if the test failed inside: tandem shut it down already)
    assert result.error is None and result.metrics["rows"] == 32
    _check_shards(tmp_path / "b")
    assert not ray.is_initialized() and "RAY_AUTH_MODE" not in os.environ
    captured = capfd.readouterr()
    for text in ("Token authentication", "Started a local Ray instance", "split(2"):
        assert text not in captured.err + captured.out
    if auth is not None:
        os.environ["RAY_AUTH_MODE"] = auth


def test_without_ray_the_error_names_the_extra(tmp_path):
    """A process where ``import ray`` fails: the trainer's error says to install the extra,
    before any worker starts."""
    script = tmp_path / "no_ray.py"
    script.write_text(textwrap.dedent("""
        import sys
        sys.modules["ray"] = None  # as if Ray were not installed

        import tandem
        from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

        class Dataset:  # what a pickled ray.data.Dataset would look like
            __module__ = "ray.data.dataset"

        def loop():
            raise AssertionError("no worker may start")

        tandem.init(num_cpus=2)
        try:
            DataParallelTrainer(loop, datasets={"train": Dataset()},
                                scaling_config=ScalingConfig(num_workers=2),
                                run_config=RunConfig(storage_path=sys.argv[1], verbose=0)).fit()
        except Exception as e:
            print("ERROR", type(e).__name__, e)
        tandem.shutdown()
    """))
    out = subprocess.run([sys.executable, str(script), str(tmp_path / "r")],
                         check=False, capture_output=True, text=True, timeout=120)
    assert "ERROR" in out.stdout, out.stderr[-2000:]
    assert 'pip install "tandem-ml[ray]"' in out.stdout and "Ray Data" in out.stdout
    assert "no worker may start" not in out.stdout + out.stderr
