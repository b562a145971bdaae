"""Boosted-tree data handling on the driver: shards, checks, metric combination."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tandem._core.errors import ConfigError
from tandem.train._internal import gbdt


def test_pieces_keep_every_row():
    df = pd.DataFrame({"x": range(7), "y": [0, 1] * 3 + [0]})
    pieces = gbdt.describe("train", df, 3, "y")
    assert [len(p) for p in pieces.pieces] == [2, 2, 3]
    assert pd.concat(pieces.pieces)["x"].tolist() == list(range(7))
    xy = gbdt.describe("train", (np.arange(10).reshape(5, 2), np.arange(5)), 2, None)
    assert [len(x) for x, _ in xy.pieces] == [2, 3]


def test_numpy_label_is_a_column_index():
    arr = np.array([[1.0, 2.0, 0.0], [3.0, 4.0, 1.0]])
    pieces = gbdt.describe("train", arr, 1, 2)
    x, y = gbdt.features_and_label(gbdt.load_shard(pieces, 0, 1), 2)
    assert x.tolist() == [[1.0, 2.0], [3.0, 4.0]] and y.tolist() == [0.0, 1.0]


@pytest.mark.parametrize(("data", "label", "message"), [
    (pd.DataFrame({"a": [1, 2]}), "y", r"label_column='y' is not a column.*\['a'\]"),
    (pd.DataFrame({"a": ["u", "v"], "y": [0, 1]}), "y", r"\['a'\] are not numeric"),
    (pd.DataFrame({"a": [1.0], "y": [0]}), "y", r"has 1 rows but .* 2 workers"),
    (pd.DataFrame({"a": [1.0, 2.0]}), None, r"label_column is required"),
    ({"a": 1}, "y", r"boosted-tree trainers take a pandas DataFrame"),
    ("/nonexistent/*.parquet", "y", r"no file matches"),
])
def test_bad_datasets_are_named(data, label, message):
    with pytest.raises(ConfigError, match=message):
        gbdt.describe("train", data, 2, label)


def test_files_are_shared_out_by_file_then_row_group(tmp_path):
    df = pd.DataFrame({"a": np.arange(100.0), "y": np.arange(100) % 2})
    for i in range(3):
        df.iloc[i * 30:(i + 1) * 30].to_parquet(tmp_path / f"p{i}.parquet")
    src = gbdt.describe("train", str(tmp_path / "p*.parquet"), 2, "y")
    assert isinstance(src, gbdt.FileSource) and len(src.paths) == 3
    got = [gbdt.load_shard(src, r, 2)["a"].tolist() for r in range(2)]
    assert sorted(got[0] + got[1]) == list(np.arange(90.0))
    df.to_parquet(tmp_path / "one.parquet", row_group_size=25)
    one = gbdt.describe("train", str(tmp_path / "one.parquet"), 2, "y")
    halves = [gbdt.load_shard(one, r, 2)["a"].tolist() for r in range(2)]
    assert len(halves[0]) == len(halves[1]) == 50 and not set(halves[0]) & set(halves[1])
    df.to_csv(tmp_path / "d.csv", index=False)
    csv = gbdt.describe("train", str(tmp_path / "d.csv"), 3, "y")
    assert sum(len(gbdt.load_shard(csv, r, 3)) for r in range(3)) == 100


def test_categories_unified_across_workers():
    a = pd.DataFrame({"c": pd.Categorical(["x", "y"])})
    b = pd.DataFrame({"c": pd.Categorical(["z", "y"])})
    per_rank = [{"train": a}, {"train": b}]
    gathered: list = []
    for shards in per_rank:  # what each rank would send
        cols = {"c": shards["train"]["c"].cat.categories.tolist()}
        gathered.append(cols)
    for shards in per_rank:
        gbdt.unify_categories(shards, lambda _cols: gathered)
    assert a["c"].cat.categories.tolist() == b["c"].cat.categories.tolist() == ["x", "y", "z"]
    assert b["c"].tolist() == ["z", "y"]


def test_combined_metrics_weight_rows():
    per_rank = [({"train-logloss": 0.2, "train-rmse": 1.0}, {"train": 100}),
                ({"train-logloss": 0.5, "train-rmse": 2.0}, {"train": 300})]
    out = gbdt.combine_metrics(per_rank)
    assert out["train-logloss"] == pytest.approx((0.2 * 100 + 0.5 * 300) / 400)
    assert out["train-rmse"] == pytest.approx(math.sqrt((1 * 100 + 4 * 300) / 400))


def test_pieces_shared_by_fewer_workers_keep_every_row():
    df = pd.DataFrame({"x": range(13), "y": [0, 1] * 6 + [0]})
    pieces = gbdt.describe("train", df, 4, "y")
    assert len(pieces.pieces) == 4
    halves = [gbdt.load_shard(pieces, r, 2) for r in (0, 1)]  # a trial with 2 workers
    assert [h["x"].tolist() for h in halves] == [list(range(6)), list(range(6, 13))]
    assert gbdt.load_shard(pieces, 0, 1)["x"].tolist() == list(range(13))
    with pytest.raises(ConfigError, match=r"split into 4 pieces.*3 workers cannot share"):
        gbdt.load_shard(pieces, 0, 3)


def test_text_column_of_a_file_is_named_with_what_to_do(tmp_path):
    path = tmp_path / "data.csv"
    pd.DataFrame({"colour": ["red", "blue"] * 5, "x": range(10), "y": [0, 1] * 5}).to_csv(
        path, index=False)
    with pytest.raises(ConfigError) as e:
        gbdt.describe("train", str(path), 2, "y")
    msg = str(e.value)
    assert "['colour']" in msg and str(path) in msg and "are not numeric: text" in msg
    assert f"pd.read_csv({str(path)!r}, dtype={{'colour': 'category'}})" in msg
    # doing what it says is accepted
    df = pd.read_csv(path, dtype={"colour": "category"})
    assert len(gbdt.describe("train", df, 2, "y").pieces) == 2


def test_xgboost_device_is_cuda_exactly_on_workers_given_a_gpu(monkeypatch):
    from tandem.cluster.base import Placement
    from tandem.cluster.local import LocalCluster
    from tandem.train.xgboost.trainer import worker_params

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    cluster = LocalCluster(num_cpus=4, num_gpus=1)
    gang = Placement("p", ({"CPU": 2, "GPU": 1}, {"CPU": 2}), ("n", "n"),
                     ("127.0.0.1", "127.0.0.1"), ((0,), ()))
    with_gpu, without = (cluster.worker_env(gang, i) for i in (0, 1))
    params = {"objective": "binary:logistic"}
    for env, device in ((with_gpu, "cuda"), (without, None)):
        for key, value in env.items():
            monkeypatch.setenv(key, value)
        got = worker_params(params)
        assert got.get("device") == device and got["nthread"] == 2
        assert worker_params({**params, "device": "cpu"})["device"] == "cpu"  # asked: kept
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert "device" not in worker_params(params)  # outside a gang: no GPU of its own
