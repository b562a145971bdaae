"""Ray's per-framework checkpoints and helpers with the real libraries: a model saved
with ``from_model``/``from_state_dict`` comes back predicting the same."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def _data():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 3))
    return x, (x[:, 0] > 0).astype(int)


def test_boosted_tree_checkpoints_round_trip(tmp_path):
    import lightgbm
    import xgboost

    from tandem.train.lightgbm import LightGBMCheckpoint
    from tandem.train.xgboost import XGBoostCheckpoint

    x, y = _data()
    booster = xgboost.train({"objective": "binary:logistic"}, xgboost.DMatrix(x, y), 3)
    ckpt = XGBoostCheckpoint.from_model(booster, preprocessor={"scale": 2})
    assert sorted(p.name for p in Path(ckpt.path).iterdir()) == [
        "model.json", "preprocessor.pkl"]
    np.testing.assert_allclose(ckpt.get_model().predict(xgboost.DMatrix(x)),
                               booster.predict(xgboost.DMatrix(x)))
    assert ckpt.get_preprocessor() == {"scale": 2}

    lgb = lightgbm.train({"objective": "binary", "verbose": -1}, lightgbm.Dataset(x, y), 3)
    target = tmp_path / "lgb"
    target.mkdir()
    ckpt2 = LightGBMCheckpoint.from_model(lgb, path=str(target))
    assert ckpt2.path == str(target) and (target / "model.txt").exists()
    np.testing.assert_allclose(ckpt2.get_model().predict(x), lgb.predict(x))
    assert ckpt2.get_preprocessor() is None
    with pytest.raises(ValueError, match="must be a directory"):
        LightGBMCheckpoint.from_model(lgb, path=str(tmp_path / "missing"))


def test_torch_checkpoint_and_deprecated_helpers():
    import torch

    from tandem.train.torch import (
        TorchCheckpoint,
        accelerate,
        backward,
        get_devices,
        prepare_optimizer,
    )

    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    x = torch.randn(4, 3)
    wrapped = {"module." + k: v for k, v in model.state_dict().items()}  # as DDP names them
    loaded = TorchCheckpoint.from_state_dict(wrapped).get_model(torch.nn.Linear(3, 1))
    assert torch.equal(loaded(x), model(x))
    with pytest.raises(ValueError, match="state_dict"):
        TorchCheckpoint.from_state_dict(model.state_dict()).get_model()
    whole = TorchCheckpoint.from_model(model)
    with pytest.warns(UserWarning, match="Discarding provided `model`"):
        assert torch.equal(whole.get_model(torch.nn.Linear(3, 1))(x), model(x))
    for fn, arg in ((accelerate, False), (prepare_optimizer, None), (backward, None)):
        with pytest.raises(DeprecationWarning, match="native PyTorch mixed precision"):
            fn(arg)
    assert get_devices() == [torch.device("cpu")]  # no GPU given to this process


def test_normalize_pandas_for_lightgbm():
    import pandas as pd
    import pyarrow as pa

    from tandem.train.lightgbm import normalize_pandas_for_lightgbm

    df = pd.DataFrame({
        "i": pd.array([1, 2], dtype=pd.ArrowDtype(pa.int32())),
        "u": pd.array([1, 2], dtype=pd.ArrowDtype(pa.uint8())),
        "f": pd.array([0.5, None], dtype=pd.ArrowDtype(pa.float64())),
        "b": pd.array([True, False], dtype=pd.ArrowDtype(pa.bool_())),
        "s": pd.array(["a", "b"], dtype=pd.ArrowDtype(pa.string())),
        "n": [1.0, 2.0],
    })
    out = normalize_pandas_for_lightgbm(df)
    assert [str(t) for t in out.dtypes] == ["Int32", "UInt8", "Float64", "boolean",
                                            "string[pyarrow]", "float64"]
    assert out["f"].isna().tolist() == [False, True]
