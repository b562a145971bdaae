"""tandem.model: write a model once; train it on a gang of workers, tune it, serve it.

    from tandem import model

    class Net(model.TorchModel):
        def setup(self): ...
        def forward(self, x): ...
        def training_step(self, batch, batch_idx): ...

The top layer (DESIGN.md, "The model layer"): it may use tune, train and jobs; nothing
below imports it. ``import tandem.model`` does not import torch.
"""

from __future__ import annotations

from tandem.model._api import ModelJobHandle, ModelResult, train, tune
from tandem.model._data import DataError
from tandem.model._loop import NonFiniteLossError
from tandem.model._model import Model, ModelDefinitionError, TorchModel
from tandem.model._settings import TrainSettings, TuneSettings
from tandem.model._trees import LightGBMModel, XGBoostModel  # xgboost/lightgbm load on use

__all__ = [
    "DataError",
    "LightGBMModel",
    "Model",
    "ModelDefinitionError",
    "ModelJobHandle",
    "ModelResult",
    "NonFiniteLossError",
    "TorchModel",
    "TrainSettings",
    "TuneSettings",
    "XGBoostModel",
    "train",
    "tune",
]
