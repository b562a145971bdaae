"""tandem.model: write a model once; train it on a gang of workers, tune it, serve it.

    from tandem import model

    class Net(model.TorchModel):
        def setup(self): ...
        def forward(self, x): ...
        def training_step(self, batch, batch_idx): ...

The top layer (DESIGN.md, "The model layer"): it may use tune, train and jobs; nothing
below imports it. ``import tandem.model`` is light: the registry and serving names are
imported with it (without SQL, torch or ``tandem.train``), the rest on first use
(``tandem._core.lazy``), so a serving replica, which imports this package to unpickle its
model, never imports the training code. ``import tandem.model`` by a program starts torch
(with the replica's code, not the training code) importing in the process workers and
replicas fork from, so the first ``serve``/``train`` finds it done; the training code
joins it when a ``TorchModel`` subclass is defined (``TANDEM_EARLY_IMPORT=0``: neither).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports
from tandem.model._early import imported_by_tandem, start_torch_model_imports

# -- registry and serving (issue 14) --------------------------------------------------------
# (``serve`` is both the subpackage and the function: importing the function last makes
# ``tandem.model.serve`` the function, as the API says; ``from tandem.model.serve import X``
# still reaches the subpackage.)
from tandem.model._settings import TrainSettings, TuneSettings
from tandem.model.registry import ModelRef, alias, delete, get, put
from tandem.model.registry import list as list
from tandem.model.serve import ServeHandle, ServeSettings, serve

if TYPE_CHECKING:
    from tandem.model._api import train, tune
    from tandem.model._data import DataError
    from tandem.model._jax import JaxModel
    from tandem.model._loop import NonFiniteLossError
    from tandem.model._model import Model, ModelDefinitionError, TorchModel
    from tandem.model._result import ModelJobHandle, ModelResult
    from tandem.model._tf import TensorflowModel
    from tandem.model._trees import LightGBMModel, XGBoostModel

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "train": "._api", "tune": "._api",  # tandem.train and tandem.tune: on first use
    "ModelJobHandle": "._result", "ModelResult": "._result",
    "DataError": "._data",
    "JaxModel": "._jax",  # jax loads on use
    "NonFiniteLossError": "._loop",
    "Model": "._model", "ModelDefinitionError": "._model", "TorchModel": "._model",
    "TensorflowModel": "._tf",  # tensorflow loads on use
    "LightGBMModel": "._trees", "XGBoostModel": "._trees",  # xgboost/lightgbm load on use
})

__all__ = [
    "DataError",
    "JaxModel",
    "LightGBMModel",
    "Model",
    "ModelDefinitionError",
    "ModelJobHandle",
    "ModelRef",
    "ModelResult",
    "NonFiniteLossError",
    "ServeHandle",
    "ServeSettings",
    "TensorflowModel",
    "TorchModel",
    "TrainSettings",
    "TuneSettings",
    "XGBoostModel",
    "alias",
    "delete",
    "get",
    "list",
    "put",
    "serve",
    "train",
    "tune",
]

if not imported_by_tandem():  # a program, not the CLI's registry commands or a server
    start_torch_model_imports(at_import=True)
