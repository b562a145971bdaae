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

import importlib
import os
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, cast

from tandem._core.errors import ConfigError
from tandem.model._data import Arrays, rank_datasets
from tandem.model._model import Model


class _TreeModel(Model):
    """What both tree models share: ``self.booster`` is the weights; the library's trainer
    (``trainer_class()``) trains, loads and counts rounds."""

    library: ClassVar[str] = ""
    weights_file: ClassVar[str] = ""
    booster: Any = None

    def setup(self) -> None:
        """Nothing to build: the booster comes from training or ``load_weights``."""

    def preprocess(self, x: object) -> object:
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

    def save_weights(self, directory: str) -> None:
        self._require_booster().save_model(os.path.join(directory, self.weights_file))

    def load_weights(self, directory: str) -> None:
        self.ensure_setup()
        path = os.path.join(os.fspath(directory), self.weights_file)
        trainer = cast(Any, self.trainer_class())
        self.booster = trainer.report_callback_class().load_booster(path)

    @classmethod
    def trainer_class(cls) -> type:
        module = importlib.import_module(f"tandem.train.{cls.library}")
        return cast(type, getattr(module, cls.trainer_name))

    @classmethod
    def worker_loop(cls) -> Callable[..., object]:
        return tree_model_loop

    @classmethod
    def check_definition(cls) -> None:
        """Tree models define setup/forward themselves."""

    @classmethod
    def check_training_definition(cls) -> None:
        """Nothing to define: training is the library's."""

    trainer_name: ClassVar[str] = ""


class XGBoostModel(_TreeModel):
    """An XGBoost booster. ``config`` is XGBoost's params (``objective``, ``eval_metric``,
    ``max_depth``...), plus optionally ``num_boost_round``."""

    library = "xgboost"
    trainer_name = "XGBoostTrainer"
    weights_file = "model.ubj"
    default_config: ClassVar[dict[str, Any]] = {"max_depth": 6}  # XGBoost's own default

    def forward(self, x: Any) -> Any:
        import xgboost

        booster = self._require_booster()
        return booster.predict(xgboost.DMatrix(x, enable_categorical=True))


class LightGBMModel(_TreeModel):
    """A LightGBM booster. ``config`` is LightGBM's params (``objective``, ``metric``,
    ``num_leaves``...), plus optionally ``num_boost_round``."""

    library = "lightgbm"
    trainer_name = "LightGBMTrainer"
    weights_file = "model.txt"
    default_config: ClassVar[dict[str, Any]] = {"num_leaves": 31}  # LightGBM's own default

    def forward(self, x: Any) -> Any:
        return self._require_booster().predict(x)


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
    rank, world = train.get_context().world_rank, train.get_context().world_size
    shards = rank_datasets(payload.datasets, payload.datasets_to_split, rank, world)
    for name, shard in shards.items():
        if isinstance(shard, Arrays):  # this rank's rows
            splits[name] = (shard.x, shard.y)
        else:  # a ray.data shard
            frame = _ray_rows(shard, rank, world)
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


def tree_model_loop(payload_bytes: bytes, config: dict[str, object]) -> None:
    """The per-worker function of ``model.train`` for a tree model: the library's trainer
    trains the rounds (resuming from the run's checkpoint), reporting ``epoch`` = round."""
    from tandem import train
    from tandem.model._model import identity_files

    model, splits, params, rounds, settings = _worker_state(payload_bytes, config)
    extra = identity_files(model) if train.get_context().world_rank == 0 else None
    trainer = cast(Any, model.trainer_class())
    trainer.train_rounds(params, splits, rounds, announce=False, numbered=True,
                         filename=model.weights_file, frequency=settings.checkpoint_every,
                         extra_files=extra)
