"""``Model`` and ``TorchModel``: write a model once; train, tune and serve it.

A user model subclasses one of these. The framework calls ``ensure_setup()`` (which runs
the user's ``setup()`` once) wherever the model is used: on each training worker, in each
serving replica, or locally on the first ``predict``. The contract the registry, serving
and the boosted-tree models build on is ``shared/MODEL_CONTRACT.md``:

- ``save(directory)`` writes ``save_weights`` + ``model.pkl`` (the class, by value when it
  lives in a script, and the config) + ``tandem_model.json`` (versions);
- ``Model.load(directory)`` builds ``cls(config)`` and loads the weights;
- ``Model.from_checkpoint(checkpoint)`` does the same from a training checkpoint.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from tandem._core.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from tandem.model._loop import _Hook
    from tandem.train import Checkpoint

from tandem.model._files import (  # noqa: F401 - their names here too
    META_FILE,
    OPTIMIZER_FILE,
    PICKLE_FILE,
    TRAINER_STATE_FILE,
    WEIGHTS_FILE,
    ModelDefinitionError,
    _installed,
    _jsonable,
    _package_version,
    identity_files,
    pickled_by_value,
)


def run_sync(value: object) -> Any:
    """``value``, or what it resolves to when it is a coroutine (user hooks may be
    ``async def``). Called from synchronous code: runs the coroutine in a fresh event loop,
    in a helper thread when this thread already runs one."""
    if not inspect.isawaitable(value):
        return value

    async def _await() -> object:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(_await())
    box: dict[str, Any] = {}

    def _target() -> None:
        try:
            box["value"] = asyncio.run(_await())
        except BaseException as exc:  # noqa: BLE001 -- re-raised in the caller's thread
            box["error"] = exc

    t = threading.Thread(target=_target, name="tandem-model-sync")
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _overrides(cls: type, name: str, base: type) -> bool:
    """Whether ``cls`` defines ``name`` somewhere below ``base`` in its MRO."""
    for klass in cls.__mro__:
        if klass is base:
            return False
        if name in vars(klass):
            return True
    return False



class Model:
    """A framework-agnostic model: the user writes ``setup`` and ``forward``; the framework
    owns where and when they run.

    Contract:
        - ``MyModel(config)`` is cheap: ``self.config`` is ``default_config`` updated by
          ``config`` (a deep copy). Heavy work belongs in ``setup()``.
        - ``ensure_setup()`` runs ``setup()`` once (a framework call, not a user one).
        - ``predict(x)`` (and ``model(x)``) = ``postprocess(forward(preprocess(x)))``.
        - ``save_weights``/``load_weights`` are what a backend subclass implements;
          ``save``/``load``/``from_checkpoint`` are built on them.

    Subclasses for a framework (``TorchModel``, ``XGBoostModel``, ``LightGBMModel``)
    implement the weights methods and the training loop.
    """

    default_config: ClassVar[dict[str, Any]] = {}
    example_input: ClassVar[Any] = None
    """An input ``predict`` accepts (a class attribute, or a method returning one); the
    registry runs ``predict`` on it when a version is stored. None: no check."""

    def __init__(self, config: Mapping[str, Any] | None = None) -> None:
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(
                f"{type(self).__name__}(config={config!r}): config must be a dict of settings "
                f"(or None for the defaults {type(self).default_config!r})."
            )
        self.config: dict[str, Any] = copy.deepcopy(
            {**type(self).default_config, **dict(config or {})}
        )
        self.is_setup = False

    # -- user hooks ---------------------------------------------------------------------

    def setup(self) -> None:
        """Builds the network and anything heavy. Runs once, where the model is used."""
        raise ModelDefinitionError(
            f"{type(self).__name__} does not define setup(). Write `def setup(self): ...` "
            f"that builds the model (e.g. `self.net = torch.nn.Linear(...)` for a TorchModel)."
        )

    def forward(self, x: Any) -> Any:
        """Model input -> model output."""
        raise ModelDefinitionError(
            f"{type(self).__name__} does not define forward(x). Write `def forward(self, x): "
            f"return ...` (the output for a preprocessed input batch)."
        )

    def preprocess(self, x: Any) -> Any:
        """Raw input -> model input. Default: a float32 NumPy array."""
        import numpy as np

        return np.asarray(x, dtype=np.float32)

    def postprocess(self, y: Any) -> Any:
        """Model output -> answer. Default: as is."""
        return y

    @classmethod
    def hyperparameter_space(cls) -> dict[str, Any]:
        """A tune param space over this model's config keys (default: empty)."""
        return {}

    # -- framework calls ----------------------------------------------------------------

    @classmethod
    def check_definition(cls) -> None:
        """Raises ``ModelDefinitionError`` when the class lacks ``setup`` or ``forward``.
        Called before any worker or replica starts."""
        missing = [m for m in ("setup", "forward") if not _overrides(cls, m, Model)]
        if missing:
            names = " and ".join(f"{m}()" for m in missing)
            raise ModelDefinitionError(
                f"{cls.__name__} does not define {names}. A model writes at least "
                f"`def setup(self)` (build the network) and `def forward(self, x)`."
            )

    # -- how model.train runs this class (a framework subclass overrides these) ----------

    @classmethod
    def check_training_definition(cls) -> None:
        """Raises ``ModelDefinitionError`` when the class cannot be trained (e.g. it lacks
        ``training_step``). Called by ``model.train``/``model.tune`` before any worker starts."""
        cls.check_definition()

    @classmethod
    def trainer_class(cls) -> type:
        """The ``DataParallelTrainer`` subclass ``model.train`` builds (its public
        constructor, with ``worker_loop()`` as the per-worker function)."""
        raise ModelDefinitionError(
            f"{cls.__name__} subclasses Model directly, which has no training loop. Subclass "
            f"TorchModel (or XGBoostModel / LightGBMModel) to train it with model.train."
        )

    @classmethod
    def worker_loop(cls) -> Callable[..., object]:
        """The per-worker function ``f(payload_bytes, config)``: ``payload_bytes`` is a
        cloudpickled ``tandem.model._loop.WorkerPayload``, ``config`` the model config."""
        raise ModelDefinitionError(
            f"{cls.__name__} subclasses Model directly, which has no training loop. Subclass "
            f"TorchModel (or XGBoostModel / LightGBMModel) to train it with model.train."
        )

    def ensure_setup(self) -> None:
        """Runs ``setup()`` once (awaiting it if it is ``async def``)."""
        if self.is_setup:
            return
        setup: Callable[[], Any] = self.setup  # may be async def
        run_sync(setup())
        self.is_setup = True

    def predict(self, x: Any) -> Any:
        """``postprocess(forward(preprocess(x)))``, after ``ensure_setup()``."""
        self.ensure_setup()
        return self.postprocess(run_sync(self.forward(self.preprocess(x))))

    def __call__(self, x: Any) -> Any:
        return self.predict(x)

    def save_weights(self, directory: str) -> None:
        """Writes the trained state into the local ``directory``."""
        raise NotImplementedError(
            f"{type(self).__name__}.save_weights: subclass TorchModel, XGBoostModel or "
            f"LightGBMModel, or implement save_weights/load_weights for your framework."
        )

    def load_weights(self, directory: str) -> None:
        """Calls ``ensure_setup()``, then loads the state ``save_weights`` wrote."""
        raise NotImplementedError(
            f"{type(self).__name__}.load_weights: subclass TorchModel, XGBoostModel or "
            f"LightGBMModel, or implement save_weights/load_weights for your framework."
        )

    def weights_state(self) -> Any:
        """The trained state as one picklable value: what ``save_weights`` writes, in
        memory (``model.train`` hands a set-up instance's to its workers in the job
        payload). Default: the files ``save_weights`` writes, by name; a framework
        subclass returns its own state (a ``TorchModel`` its modules' ``state_dict``s)."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tandem-weights-") as d:
            self.save_weights(d)
            files = {}
            for name in os.listdir(d):
                with open(os.path.join(d, name), "rb") as f:
                    files[name] = f.read()
            return files

    def load_weights_state(self, state: Any) -> None:
        """Calls ``ensure_setup()``, then loads what ``weights_state()`` returned."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="tandem-weights-") as d:
            for name, blob in dict(state).items():
                with open(os.path.join(d, name), "wb") as f:
                    f.write(blob)
            self.load_weights(d)

    def save(self, directory: str) -> None:
        """Writes a directory ``Model.load`` reads back in any process: the weights,
        ``model.pkl`` (class + config) and ``tandem_model.json``."""
        directory = os.fspath(directory)
        os.makedirs(directory, exist_ok=True)
        self.save_weights(directory)
        for name, blob in identity_files(self).items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(blob)

    @classmethod
    def load(cls, directory: str) -> Model:
        """Builds the model a ``save()`` directory holds, with its weights."""
        import cloudpickle

        directory = os.fspath(directory)
        path = os.path.join(directory, PICKLE_FILE)
        if not os.path.isfile(path):
            what = "is missing" if not os.path.exists(directory) else f"has no {PICKLE_FILE}"
            raise ConfigError(
                f"{cls.__name__}.load({directory!r}): the directory {what}. Give a directory "
                f"written by Model.save() (a model.train result's checkpoint is one)."
            )
        with open(path, "rb") as f:
            state = cloudpickle.load(f)
        klass = state["cls"]
        if not (isinstance(klass, type) and issubclass(klass, cls)):
            raise ConfigError(
                f"{cls.__name__}.load({directory!r}): the directory holds a "
                f"{getattr(klass, '__qualname__', klass)!r}, not a {cls.__name__}. Load it with "
                f"Model.load()."
            )
        instance = klass(state["config"])
        instance.load_weights(directory)
        return instance

    @classmethod
    def from_checkpoint(cls, checkpoint: Checkpoint | str | os.PathLike[str]) -> Model:
        """The model a training checkpoint holds (a ``tandem.train.Checkpoint`` or a path,
        local or an fsspec URL, written by ``save()``)."""
        if isinstance(checkpoint, (str, os.PathLike)):
            from tandem.train import Checkpoint

            path = os.fspath(checkpoint)
            checkpoint = Checkpoint(path if "://" in path else os.path.abspath(path))
        with checkpoint.as_directory() as directory:
            return cls.load(directory)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(config={self.config!r})"


class TorchModel(Model):
    """A PyTorch model. ``setup()`` sets ``torch.nn.Module`` attributes (``self.net = ...``);
    their ``state_dict``s, by attribute name, are the weights (``model.pt``).

    Training (``tandem.model.train``) calls, on each worker:
    ``training_step(batch, batch_idx)`` -> a loss tensor or a dict with ``"loss"``;
    ``validation_step(batch, batch_idx)`` -> a dict of metrics (reported as ``val_*``);
    ``configure_optimizers()`` -> an optimizer or ``(optimizer, lr_scheduler)`` (default:
    Adam with ``config["lr"]``, 1e-3 when absent); and the hooks ``on_fit_start()``,
    ``on_epoch_start(epoch)``, ``on_epoch_end(epoch, metrics)``,
    ``on_batch_start(batch, batch_idx)``, ``on_batch_end(batch, batch_idx, output)``,
    ``on_fit_end()``. Any of them may be ``async def``.

    ``self.device`` is where the modules live (``cpu`` unless training on a GPU).
    """

    device: Any = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # a program defining a torch model will train or serve it: torch starts importing
        # where its workers fork from, while the program prepares its data
        from tandem.model._early import start_torch_model_imports

        start_torch_model_imports()

    # -- modules ------------------------------------------------------------------------

    def modules(self) -> dict[str, torch.nn.Module]:
        """The ``torch.nn.Module`` attributes, by name (a DDP wrapper is unwrapped)."""
        import torch

        out: dict[str, torch.nn.Module] = {}
        for name, value in vars(self).items():
            if isinstance(value, torch.nn.parallel.DistributedDataParallel):
                value = value.module
            if isinstance(value, torch.nn.Module):
                out[name] = value
        return out

    def parameters(self) -> list[torch.nn.Parameter]:
        """Every parameter of every module (each once)."""
        seen: set[int] = set()
        params = []
        for module in self.modules().values():
            for p in module.parameters():
                if id(p) not in seen:
                    seen.add(id(p))
                    params.append(p)
        return params

    # -- defaults -----------------------------------------------------------------------

    def preprocess(self, x: Any) -> Any:
        """Raw input -> a float32 tensor (a list of inputs is stacked)."""
        import numpy as np
        import torch

        if isinstance(x, torch.Tensor):
            return x.float()
        if isinstance(x, (list, tuple)) and x and isinstance(x[0], torch.Tensor):
            return torch.stack([t.float() for t in x])
        return torch.as_tensor(np.asarray(x, dtype=np.float32))

    def training_step(self, batch: Any, batch_idx: int) -> object:
        """One training batch -> a loss tensor or ``{"loss": ..., **metrics}``."""
        raise ModelDefinitionError(
            f"{type(self).__name__} does not define training_step(batch, batch_idx), which "
            f"training needs. Write one that returns the loss tensor (or a dict with "
            f'"loss"), e.g. `x, y = batch; return F.cross_entropy(self.forward(x), y)`.'
        )

    def validation_step(self, batch: Any, batch_idx: int) -> object:
        """One validation batch -> a dict of metrics (default: none)."""
        return None

    def configure_optimizers(self) -> object:
        """An optimizer or ``(optimizer, lr_scheduler)``. Default: Adam, ``config["lr"]``."""
        import torch

        params = self.parameters()
        if not params:
            raise ModelDefinitionError(
                f"{type(self).__name__}.setup() set no torch.nn.Module attribute with "
                f"parameters, so there is nothing to train. Assign your network to an "
                f"attribute in setup (self.net = ...)."
            )
        return torch.optim.Adam(params, lr=float(self.config.get("lr", 1e-3)))

    def on_fit_start(self) -> _Hook:
        """Before the first epoch, on each worker."""

    def on_epoch_start(self, epoch: int) -> _Hook:
        """Before each epoch's first batch."""

    def on_epoch_end(self, epoch: int, metrics: dict[str, float | None]) -> _Hook:
        """After validation, with the metrics about to be reported."""

    def on_batch_start(self, batch: Any, batch_idx: int) -> _Hook:
        """Before each training batch."""

    def on_batch_end(self, batch: Any, batch_idx: int, output: object) -> _Hook:
        """After each optimizer step, with what ``training_step`` returned."""

    def on_fit_end(self) -> _Hook:
        """After the last epoch, on each worker."""

    # -- framework calls ----------------------------------------------------------------

    @classmethod
    def trainer_class(cls) -> type:
        from tandem.train.torch import TorchTrainer

        return TorchTrainer

    @classmethod
    def worker_loop(cls) -> Callable[..., object]:
        from tandem.model._loop import run_worker  # (training only: a replica never needs it)

        return run_worker

    @classmethod
    def check_training_definition(cls) -> None:
        """``check_definition`` plus ``training_step``: called before a training job starts."""
        cls.check_definition()
        if not _overrides(cls, "training_step", TorchModel):
            raise ModelDefinitionError(
                f"{cls.__name__} does not define training_step(batch, batch_idx), which "
                f"model.train needs. Write one that returns the loss tensor (or a dict with "
                f'"loss"), e.g. `x, y = batch; return F.cross_entropy(self.forward(x), y)`.'
            )

    def ensure_setup(self) -> None:
        if self.is_setup:
            return
        super().ensure_setup()
        import torch

        if self.device is None:
            params = self.parameters()
            self.device = params[0].device if params else torch.device("cpu")

    def predict(self, x: Any) -> Any:
        """``postprocess(forward(preprocess(x)))`` in eval mode without gradients (the
        modules' train/eval modes are restored after)."""
        import torch

        self.ensure_setup()
        modules = self.modules()
        modes = {name: m.training for name, m in modules.items()}
        try:
            for m in modules.values():
                m.eval()
            with torch.no_grad():
                inputs = self.preprocess(x)
                if isinstance(inputs, torch.Tensor) and self.device is not None:
                    inputs = inputs.to(self.device)
                out = run_sync(self.forward(inputs))
            return self.postprocess(out)
        finally:
            for name, m in modules.items():
                m.train(modes[name])

    def weights_state(self) -> dict[str, dict[str, torch.Tensor]]:

        """``{attribute name: state_dict}`` of every module, on CPU (what ``model.pt``
        holds)."""
        self.ensure_setup()
        return {
            name: {k: v.detach().cpu() for k, v in m.state_dict().items()}
            for name, m in self.modules().items()
        }

    def load_weights_state(self, state: Any, where: str = "") -> None:
        self.ensure_setup()
        modules = self.modules()
        missing = sorted(set(modules) - set(state))
        extra = sorted(set(state) - set(modules))
        if missing or extra:
            call = f"load_weights({where!r})" if where else "load_weights_state(state)"
            raise ConfigError(
                f"{type(self).__name__}.{call}: the weights hold modules "
                f"{sorted(state)}, the model after setup() has {sorted(modules)} (missing "
                f"{missing}, unexpected {extra}). Was it saved from another class or config?"
            )
        for name, module in modules.items():
            module.load_state_dict(state[name])

    def save_weights(self, directory: str) -> None:
        """``model.pt``: ``weights_state()``, ``{attribute name: state_dict}``, on CPU."""
        import torch

        state = self.weights_state()
        os.makedirs(directory, exist_ok=True)
        torch.save(state, os.path.join(directory, WEIGHTS_FILE))

    def load_weights(self, directory: str) -> None:
        import torch

        self.ensure_setup()
        path = os.path.join(os.fspath(directory), WEIGHTS_FILE)
        if not os.path.isfile(path):
            raise ConfigError(
                f"{type(self).__name__}.load_weights({directory!r}): no {WEIGHTS_FILE} there. "
                f"Give a directory written by save_weights() or save()."
            )
        state = torch.load(path, map_location=self.device or "cpu", weights_only=True)
        self.load_weights_state(state, where=os.fspath(directory))
