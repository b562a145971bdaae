"""``XGBoostModel`` and ``LightGBMModel``: boosted trees as model-layer models.

``model.train(XGBoostModel, config={...xgboost params...}, train_settings={"num_workers":
2, "num_epochs": 50, "label_column": "target"}, dataset={"train": df, "valid": df2})``
trains one booster on the gang (``XGBoostTrainer`` underneath: XGBoost's collective, a
report per round, a checkpoint every ``checkpoint_every`` rounds and after the last).
A round is an epoch: ``num_epochs`` is the number of boosting rounds (or
``config["num_boost_round"]``). The result's ``.model`` predicts; the registry and serving
use ``save``/``load`` like any model. xgboost / lightgbm are imported only when used.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from tandem._core.errors import ConfigError
from tandem.model._model import Model, identity_files


class _TreeModel(Model):
    """What both tree models share: ``self.booster`` is the weights."""

    library: ClassVar[str] = ""
    weights_file: ClassVar[str] = ""
    booster: Any = None

    def setup(self) -> None:
        """Nothing to build: the booster comes from training or ``load_weights``."""

    def preprocess(self, x: Any) -> Any:
        """A DataFrame as is; anything else as a 2-D float array (one input: one row)."""
        import numpy as np

        if type(x).__module__.startswith("pandas"):
            return x
        arr = np.asarray(x, dtype=np.float32)
        return arr.reshape(1, -1) if arr.ndim == 1 else arr

    def _require_booster(self) -> Any:
        if self.booster is None:
            raise ConfigError(
                f"{type(self).__name__} has no booster yet: train it with model.train, or "
                f"load one (Model.load(directory), result.model)."
            )
        return self.booster

    @classmethod
    def check_definition(cls) -> None:
        """Tree models define setup/forward themselves."""

    @classmethod
    def check_training_definition(cls) -> None:
        """Nothing to define: training is the library's."""


class XGBoostModel(_TreeModel):
    """An XGBoost booster. ``config`` is XGBoost's params (``objective``, ``eval_metric``,
    ``max_depth``...), plus optionally ``num_boost_round``."""

    library = "xgboost"
    weights_file = "model.ubj"
    default_config: ClassVar[dict[str, Any]] = {"max_depth": 6}  # XGBoost's own default

    def forward(self, x: Any) -> Any:
        import xgboost

        booster = self._require_booster()
        return booster.predict(xgboost.DMatrix(x, enable_categorical=True))

    def save_weights(self, directory: str) -> None:
        self._require_booster().save_model(os.path.join(directory, self.weights_file))

    def load_weights(self, directory: str) -> None:
        import xgboost

        self.ensure_setup()
        booster = xgboost.Booster()
        booster.load_model(os.path.join(os.fspath(directory), self.weights_file))
        self.booster = booster

    @classmethod
    def trainer_class(cls) -> type:
        from tandem.train.xgboost import XGBoostTrainer

        return XGBoostTrainer

    @classmethod
    def worker_loop(cls) -> Callable[..., Any]:
        return xgboost_model_loop


class LightGBMModel(_TreeModel):
    """A LightGBM booster. ``config`` is LightGBM's params (``objective``, ``metric``,
    ``num_leaves``...), plus optionally ``num_boost_round``."""

    library = "lightgbm"
    weights_file = "model.txt"
    default_config: ClassVar[dict[str, Any]] = {"num_leaves": 31}  # LightGBM's own default

    def forward(self, x: Any) -> Any:
        return self._require_booster().predict(x)

    def save_weights(self, directory: str) -> None:
        self._require_booster().save_model(os.path.join(directory, self.weights_file))

    def load_weights(self, directory: str) -> None:
        import lightgbm

        self.ensure_setup()
        self.booster = lightgbm.Booster(
            model_file=os.path.join(os.fspath(directory), self.weights_file))

    @classmethod
    def trainer_class(cls) -> type:
        from tandem.train.lightgbm import LightGBMTrainer

        return LightGBMTrainer

    @classmethod
    def worker_loop(cls) -> Callable[..., Any]:
        return lightgbm_model_loop


# -- on each worker --------------------------------------------------------------------------
def _worker_state(payload_bytes: bytes, config: Mapping[str, Any]) -> tuple[
        Any, dict[str, tuple[Any, Any]], dict[str, Any], int, Any]:
    """The payload's model, this worker's ``(X, y)`` by split name, the library params, the
    number of rounds and the settings."""
    import cloudpickle

    from tandem import train

    payload = cloudpickle.loads(payload_bytes)
    settings = payload.settings
    if payload.data_source is not None or payload.splits:
        raise ConfigError(
            f"{payload.model_cls.__name__}: tree models take DataFrames (with label_column), "
            f"(X, y) arrays or ray.data Datasets in dataset={{'train': ..., 'valid': ...}}; "
            f"not torch Datasets or data classes."
        )
    splits: dict[str, tuple[Any, Any]] = {}
    for name in payload.presharded:
        shard = train.get_dataset_shard(name)
        if isinstance(shard, list):  # [Arrays] of this rank
            arrays = shard[0]
            splits[name] = (arrays.x, arrays.y)
        else:  # a ray.data shard
            frame = _ray_rows(shard, train.get_context().world_rank,
                              train.get_context().world_size)
            label = settings.label_column
            splits[name] = (frame.drop(columns=[label]), frame[label])
    params = {k: v for k, v in config.items() if k != "num_boost_round"}
    rounds = int(config.get("num_boost_round") or settings.num_epochs)
    model = payload.model_cls(dict(config))
    return model, splits, params, rounds, settings


def _ray_rows(data: Any, rank: int, world: int) -> Any:
    """This worker's rows of a ray.data shard (already split by Ray on a Ray cluster)."""
    import pandas as pd

    if not hasattr(data, "streaming_split"):  # Ray's per-worker iterator
        batches = list(data.iter_batches(batch_format="pandas", batch_size=None))
        return pd.concat(batches, ignore_index=True) if batches else pd.DataFrame()
    whole = data.to_pandas()
    n = len(whole)
    return whole.iloc[rank * n // world:(rank + 1) * n // world]


def _numbered(start: int) -> Callable[[dict[str, float]], dict[str, float]]:
    counter = itertools.count(start + 1)
    return lambda metrics: {**metrics, "epoch": next(counter)}


def xgboost_model_loop(payload_bytes: bytes, config: dict[str, Any]) -> None:
    import xgboost

    from tandem import train
    from tandem.train.xgboost import RayTrainReportCallback

    model, splits, params, rounds, settings = _worker_state(payload_bytes, config)
    threads = int(os.environ.get("TANDEM_NUM_THREADS", "0") or 0)
    if threads:
        params.setdefault("nthread", threads)
    if "device" not in params and os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
        params["device"] = "cuda"
    mats = {name: xgboost.DMatrix(x, label=y, enable_categorical=True)
            for name, (x, y) in splits.items()}
    start = None
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        start = RayTrainReportCallback.get_model(ckpt, model.weights_file)
    done = start.num_boosted_rounds() if start is not None else 0
    if done >= rounds:
        return
    callback = RayTrainReportCallback(
        filename=model.weights_file, frequency=settings.checkpoint_every,
        results_postprocessing_fn=_numbered(done),
        extra_files=identity_files(model) if train.get_context().world_rank == 0 else None)
    xgboost.train(params, mats["train"], rounds - done, evals=[(m, n) for n, m in mats.items()],
                  xgb_model=start, callbacks=[callback], verbose_eval=False)


def lightgbm_model_loop(payload_bytes: bytes, config: dict[str, Any]) -> None:
    import lightgbm

    from tandem import train
    from tandem.train.lightgbm import RayTrainReportCallback
    from tandem.train.lightgbm.trainer import worker_params

    model, splits, params, rounds, settings = _worker_state(payload_bytes, config)
    params = worker_params(params)
    x, y = splits["train"]
    train_set = lightgbm.Dataset(x, label=y, params=params, free_raw_data=False)
    sets = {"train": train_set}
    for name, (vx, vy) in splits.items():
        if name != "train":
            sets[name] = lightgbm.Dataset(vx, label=vy, reference=train_set)
    start = None
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        start = RayTrainReportCallback.get_model(ckpt, model.weights_file)
    done = start.current_iteration() if start is not None else 0
    if done >= rounds:
        return
    callback = RayTrainReportCallback(
        filename=model.weights_file, frequency=settings.checkpoint_every,
        results_postprocessing_fn=_numbered(done),
        extra_files=identity_files(model) if train.get_context().world_rank == 0 else None)
    lightgbm.train(params, train_set, rounds - done, valid_sets=list(sets.values()),
                   valid_names=list(sets), init_model=start, callbacks=[callback])
