"""tandem.model: write a model once; train it on a gang of workers, tune it, serve it.

    from tandem import model

    class Net(model.TorchModel):
        def setup(self): ...
        def forward(self, x): ...
        def training_step(self, batch, batch_idx): ...

The top layer (DESIGN.md, "The model layer"): it may use tune, train and jobs; nothing
below imports it. ``import tandem.model`` does not import torch here; it starts importing
it (with tandem's worker and replica code) in the process workers and replicas fork from,
so the first ``train``/``serve`` finds it done (``TANDEM_EARLY_IMPORT=0`` turns that off).
"""

from __future__ import annotations

from tandem.model._api import ModelJobHandle, ModelResult, train, tune
from tandem.model._data import DataError
from tandem.model._jax import JaxModel  # jax loads on use
from tandem.model._loop import NonFiniteLossError
from tandem.model._model import Model, ModelDefinitionError, TorchModel
from tandem.model._settings import TrainSettings, TuneSettings
from tandem.model._tf import TensorflowModel  # tensorflow loads on use
from tandem.model._trees import LightGBMModel, XGBoostModel  # xgboost/lightgbm load on use

# -- registry and serving (issue 14) --------------------------------------------------------
# (``serve`` is both the subpackage and the function: importing the function last makes
# ``tandem.model.serve`` the function, as the API says; ``from tandem.model.serve import X``
# still reaches the subpackage.)
from tandem.model.registry import ModelRef, alias, delete, get, put
from tandem.model.registry import list as list
from tandem.model.serve import ServeHandle, ServeSettings, serve

__all__ = [
    "DataError",
    "JaxModel",
    "LightGBMModel",
    "Model",
    "ModelDefinitionError",
    "ModelJobHandle",
    "ModelResult",
    "NonFiniteLossError",
    "TensorflowModel",
    "TorchModel",
    "TrainSettings",
    "TuneSettings",
    "XGBoostModel",
    "train",
    "tune",
]
from tandem.model._early import imported_by_tandem, start_torch_model_imports

if not imported_by_tandem():  # a program, not the CLI's registry commands or a server
    start_torch_model_imports()

__all__ += ["ModelRef", "ServeHandle", "ServeSettings", "alias", "delete", "get", "list",
            "put", "serve"]
