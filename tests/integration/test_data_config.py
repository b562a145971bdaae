"""Issue 17, item 9: ``DataParallelTrainer(dataset_config=DataConfig(datasets_to_split=[...]))``
splits only the named datasets; the others reach every worker whole, as in Ray."""

from __future__ import annotations

import json
import os

import pytest

import tandem
from tandem import train
from tandem.train import DataConfig, DataParallelTrainer, RunConfig, ScalingConfig

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _cluster():
    tandem.init(num_cpus=2)
    yield


def loop(config):
    rank = train.get_context().get_world_rank()
    seen = {name: list(train.get_dataset_shard(name)) for name in ("train", "valid")}
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump(seen, f)
    train.report({"ok": 1})


@pytest.mark.parametrize("split", [["train"], "all"])
def test_only_the_named_datasets_are_split(storage, tmp_path, split):
    out = tmp_path / "seen"
    out.mkdir()
    DataParallelTrainer(
        loop, train_loop_config={"out": str(out)},
        datasets={"train": list(range(8)), "valid": list(range(100, 106))},
        dataset_config=DataConfig(datasets_to_split=split),
        scaling_config=ScalingConfig(num_workers=2),
        run_config=RunConfig(storage_path=storage, verbose=0),
    ).fit()
    seen = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [s["train"] for s in seen] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    if split == "all":
        assert [s["valid"] for s in seen] == [[100, 101, 102], [103, 104, 105]]
    else:  # not split: every worker gets all of it
        assert [s["valid"] for s in seen] == [list(range(100, 106))] * 2
