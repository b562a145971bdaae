"""``TensorflowModel``: a Keras model as a model-layer model.

``model.train(MyKerasModel, ...)`` runs ``TensorflowTrainer`` underneath: every worker builds
the model (``setup()``) and compiles it (``compile_settings()``) inside one
``MultiWorkerMirroredStrategy`` scope, so Keras' ``fit`` all-reduces the gradients across
the gang. One report per epoch (``epoch``, Keras' logs, ``val_*``, ``epoch_time_s``,
``samples_per_s``); a checkpoint every ``checkpoint_every`` epochs and after the last (a
``Model.save()`` folder plus ``optimizer.npz`` and ``trainer_state.json``); after a worker
failure the gang restarts from it with the optimizer's state (Adam's moments, its step count),
so a resumed run takes the steps an uninterrupted one takes. Weights are stored as NumPy arrays (``model.weights.npz``, the order of
``get_weights()``), so a model trained under Keras 2 (``tf_keras``) loads under Keras 3 and
the other way round. TensorFlow is imported only where the model is used.
"""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tandem._core.errors import ConfigError
from tandem.model._data import float32_arrays, rank_datasets
from tandem.model._files import OPTIMIZER_NPZ
from tandem.model._model import (
    TRAINER_STATE_FILE,
    Model,
    ModelDefinitionError,
    _overrides,
    identity_files,
    run_sync,
)

WEIGHTS_NPZ = "model.weights.npz"

logger = logging.getLogger(__name__)


class TensorflowModel(Model):
    """A Keras model. ``setup()`` builds it and keeps it as an attribute (``self.net =
    tf.keras.Sequential([...])``; give the input shape, e.g. ``tf.keras.Input((64,))``, so
    the weights exist before the first call).

    Hooks (each optional but ``setup``):
        ``compile_settings()`` -> the keyword arguments of ``keras_model().compile(...)``;
            default ``{"optimizer": Adam(config["lr"] or 1e-3), "loss": config["loss"] or
            "mse"}``. Called inside the strategy scope on each worker.
        ``keras_model()`` -> the Keras model (default: the one attribute holding one).
        ``forward(x)`` -> default ``keras_model()(x, training=False)`` as a NumPy array.

    Data: ``dataset={"train": (X, y), "valid": (X, y)}`` (arrays, or DataFrames with
    ``label_column``); ``batch_size`` is per worker.
    """

    # -- user hooks -------------------------------------------------------------------------
    def compile_settings(self) -> dict[str, Any]:
        import tensorflow as tf

        return {"optimizer": tf.keras.optimizers.Adam(self.config.get("lr", 1e-3)),
                "loss": self.config.get("loss", "mse")}

    def keras_model(self) -> Any:
        found = [v for v in vars(self).values()
                 if hasattr(v, "get_weights") and hasattr(v, "fit") and hasattr(v, "compile")]
        if len(found) != 1:
            raise ModelDefinitionError(
                f"{type(self).__name__}: setup() must keep exactly one Keras model as an "
                f"attribute (e.g. `self.net = tf.keras.Sequential([...])`); found "
                f"{len(found)}. With several, define keras_model() to return the one to train."
            )
        return found[0]

    def forward(self, x: Any) -> Any:
        import numpy as np

        return np.asarray(self.keras_model()(x, training=False))

    # -- framework calls --------------------------------------------------------------------
    @classmethod
    def check_definition(cls) -> None:
        if not _overrides(cls, "setup", TensorflowModel):
            raise ModelDefinitionError(
                f"{cls.__name__} does not define setup(). Write `def setup(self): self.net = "
                f"tf.keras.Sequential([tf.keras.Input((n_features,)), ...])`."
            )

    @classmethod
    def check_training_definition(cls) -> None:
        from tandem.train.backends.tensorflow import require_tensorflow

        cls.check_definition()
        require_tensorflow(f"model.train({cls.__name__})")

    @classmethod
    def trainer_class(cls) -> type:
        from tandem.train.tensorflow import TensorflowTrainer

        return TensorflowTrainer

    @classmethod
    def worker_loop(cls) -> Callable[..., Any]:
        return tf_model_loop

    def weights_state(self) -> list[Any]:
        """The Keras model's weights (``get_weights()``, NumPy arrays, in its order)."""
        import numpy as np

        self.ensure_setup()
        return [np.asarray(w) for w in self.keras_model().get_weights()]

    def load_weights_state(self, state: Any) -> None:
        self.ensure_setup()
        net = self.keras_model()
        if not net.weights and self.example_input is not None:
            example = self.example_input() if callable(self.example_input) else self.example_input
            net(self.preprocess(example))  # builds the weights
        net.set_weights(list(state))

    def save_weights(self, directory: str) -> None:
        import numpy as np

        np.savez(os.path.join(directory, WEIGHTS_NPZ), *self.weights_state())

    def load_weights(self, directory: str) -> None:
        import numpy as np

        with np.load(os.path.join(os.fspath(directory), WEIGHTS_NPZ)) as data:
            self.load_weights_state([data[f"arr_{i}"] for i in range(len(data.files))])


# -- on each worker --------------------------------------------------------------------------
def _gather_ints(strategy: Any, value: int, world: int) -> list[int]:
    """Every worker's ``value`` (a collective of the strategy: every worker calls it)."""
    import tensorflow as tf

    if world == 1:
        return [value]
    per_replica = strategy.run(lambda: tf.constant([value], dtype=tf.int64))
    return [int(v) for v in strategy.gather(per_replica, axis=0).numpy()]


def _optimizer_variables(net: object) -> list[Any]:
    opt = getattr(net, "optimizer", None)
    variables = getattr(opt, "variables", None)
    if callable(variables):  # the legacy optimizers' variables() method
        variables = variables()
    return list(variables or [])


def save_optimizer(net: object, directory: str) -> None:
    """The compiled optimizer's variables (step count, slots such as Adam's moments), in
    their order, as ``optimizer.npz``."""
    import numpy as np

    variables = _optimizer_variables(net)
    if variables:
        np.savez(os.path.join(directory, OPTIMIZER_NPZ),
                 *[np.asarray(v.numpy()) for v in variables])


def load_optimizer(net: Any, strategy: Any, directory: str) -> bool:
    """Puts back the optimizer state ``save_optimizer`` wrote: builds the optimizer's slots
    (inside the strategy's scope, so they are mirrored like the weights) and assigns them.
    The learning rate stays the current config's (a PBT trial continuing a donor's
    checkpoint with a mutated ``lr`` keeps the moments but takes the new rate). Returns
    False, with a warning, when the checkpoint's state does not fit this optimizer."""
    import numpy as np

    path = os.path.join(directory, OPTIMIZER_NPZ)
    opt = getattr(net, "optimizer", None)
    if opt is None or not os.path.exists(path):
        return False
    if hasattr(opt, "build"):
        with strategy.scope():
            opt.build(net.trainable_variables)
    variables = _optimizer_variables(net)
    with np.load(path) as data:
        arrays = [data[f"arr_{i}"] for i in range(len(data.files))]
    if len(arrays) != len(variables) or any(
            tuple(a.shape) != tuple(v.shape) for a, v in zip(arrays, variables)):
        logger.warning(
            "The checkpoint's optimizer state (%d arrays) does not fit %s (%d variables): "
            "the optimizer was changed; it starts afresh.", len(arrays),
            type(opt).__name__, len(variables))
        return False
    for v, a in zip(variables, arrays):
        name = str(getattr(v, "path", None) or getattr(v, "name", ""))
        if "learning_rate" not in name:
            v.assign(a)
    return True


def _no_autoshard(ds: Any) -> object:
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return ds.with_options(options)


def tf_model_loop(payload_bytes: bytes, config: dict[str, object]) -> None:
    """The per-worker function of ``model.train`` for a ``TensorflowModel``."""
    import cloudpickle
    import numpy as np
    import tensorflow as tf

    from tandem import train
    from tandem.train import Checkpoint

    payload = cloudpickle.loads(payload_bytes)
    settings = payload.settings
    cls = payload.model_cls
    if payload.data_source is not None or payload.splits or "train" not in payload.datasets:
        raise ConfigError(
            f"{cls.__name__}: a TensorflowModel takes (X, y) arrays or DataFrames (with "
            f"label_column) in dataset={{'train': ..., 'valid': ...}}; not torch Datasets, "
            f"ray.data Datasets or data classes."
        )
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    tf.keras.utils.set_random_seed(payload.seed)  # same initial weights on every worker
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if world > 1 \
        else tf.distribute.get_strategy()
    with strategy.scope():
        model = cls(config)
        setup: Any = model.setup  # may be async def
        run_sync(setup())
        model.is_setup = True
        net = model.keras_model()
        net.compile(**model.compile_settings())
    if payload.init_weights is not None:
        model.load_weights_state(payload.init_weights)
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            model.load_weights(d)
            load_optimizer(net, strategy, d)
            with open(os.path.join(d, TRAINER_STATE_FILE)) as f:
                start = int(json.load(f)["epoch"])

    shards = rank_datasets(payload.datasets, payload.datasets_to_split, rank, world)
    x, y = float32_arrays(shards["train"])
    bs = settings.batch_size
    steps = max(1, len(x) // bs)  # even shards: the same on every worker

    def train_ds(epoch: int) -> Any:
        # the dataset's batch is the global one; each worker's replica takes its share. The
        # order is a function of (seed, rank, epoch), so a run resumed at an epoch reads
        # what an uninterrupted one reads there.
        order = np.random.default_rng([payload.seed, rank, epoch]).permutation(len(x))
        return _no_autoshard(tf.data.Dataset.from_tensor_slices((x[order], y[order]))
                             .repeat().batch(bs * world))

    valid_ds, valid_steps = None, 0
    if "valid" in shards:
        vx, vy = float32_arrays(shards["valid"])
        valid_steps = min(_gather_ints(strategy, max(1, math.ceil(len(vx) / bs)), world))
        valid_ds = _no_autoshard(tf.data.Dataset.from_tensor_slices((vx, vy)).repeat()
                                 .batch(bs * world))
    ident = identity_files(model) if rank == 0 else {}
    for epoch in range(start + 1, settings.num_epochs + 1):
        t0 = time.perf_counter()
        history = net.fit(train_ds(epoch), epochs=epoch, initial_epoch=epoch - 1,
                          steps_per_epoch=steps, verbose=0)
        train_time = time.perf_counter() - t0
        metrics: dict[str, Any] = {"epoch": epoch}
        metrics.update({k: float(v[-1]) for k, v in history.history.items()})
        if valid_ds is not None:
            logs = net.evaluate(valid_ds, steps=valid_steps, verbose=0, return_dict=True)
            metrics.update({f"val_{k}": float(v) for k, v in logs.items()})
        metrics["epoch_time_s"] = round(time.perf_counter() - t0, 6)
        metrics["samples_per_s"] = round(steps * bs * world / train_time, 3) if train_time else None
        if epoch % settings.checkpoint_every == 0 or epoch == settings.num_epochs:
            d = tempfile.mkdtemp(prefix="tandem-tf-ckpt-")
            try:
                model.save_weights(d)  # every worker reads its mirrored copy
                save_optimizer(net, d)
                if rank == 0:
                    for fname, blob in ident.items():
                        with open(os.path.join(d, fname), "wb") as fb:
                            fb.write(blob)
                    with open(os.path.join(d, TRAINER_STATE_FILE), "w") as f:
                        json.dump({"epoch": epoch, "num_epochs": settings.num_epochs,
                                   "seed": payload.seed}, f)
                    train.report(metrics, checkpoint=Checkpoint.from_directory(d))
                else:
                    train.report(metrics)
            finally:
                shutil.rmtree(d, ignore_errors=True)
        else:
            train.report(metrics)
