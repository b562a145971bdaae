"""``JaxModel``: a pure function and its parameters as a model-layer model.

``model.train(MyJaxModel, ...)`` runs ``JaxTrainer`` underneath: the workers form one
``jax.distributed`` program; each takes SGD steps on its shard under ``jax.pmap`` with the
gradients averaged across every worker (``lax.pmean``), so all hold the same parameters.
One report per epoch (``epoch``, ``loss``, ``val_loss``, ``epoch_time_s``,
``samples_per_s``); a checkpoint every ``checkpoint_every`` epochs and after the last.
Parameters are saved as NumPy arrays (``params.npz``, the leaves of the pytree in
``jax.tree_util`` order), the optimizer's state the same way (``opt_state.npz``), so a run
resumed after a worker failure continues with Adam's moments and step count. The optimizer
is an optax ``GradientTransformation`` (``optimizer()``; default plain SGD, which needs no
optax). JAX is imported only where the model is used.

Purity check (on the driver, before any worker starts, on the first ``batch_size`` rows of
the training data): ``apply`` and ``loss`` are each

1. traced with ``jax.make_jaxpr`` under ``jax.checking_leaks()``: this fails when the
   function needs concrete values (Python ``if``/``float()``/NumPy on a traced array) or
   stores a traced value outside itself (a side effect on a global, a list, ``self``);
2. called twice, and once under ``jax.jit``, on the same inputs: the three results must be
   equal, which fails when the function reads state that changes between calls (a
   counter, a global random generator, the clock).

A function that fails either is refused with ``ModelDefinitionError`` naming it and why.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.model._data import Arrays, float32_arrays, rank_datasets
from tandem.model._files import OPT_STATE_NPZ
from tandem.model._model import (
    TRAINER_STATE_FILE,
    Model,
    ModelDefinitionError,
    _overrides,
    identity_files,
    run_sync,
)
from tandem.train.jax import JaxTrainer

PARAMS_NPZ = "params.npz"

logger = logging.getLogger(__name__)


class _Sgd:
    """Plain SGD in optax's ``GradientTransformation`` form (``init``, ``update``), so the
    default needs no optax: no state, updates ``-lr * grads``."""

    def __init__(self, lr: float) -> None:
        self.lr = lr

    def init(self, params: object) -> tuple[()]:
        return ()

    def update(self, grads: object, state: object, params: object = None) -> tuple[Any, Any]:
        import jax

        lr = self.lr
        return jax.tree_util.tree_map(lambda g: -lr * g, grads), state


class JaxModel(Model):
    """A pure JAX function with parameters.

    Write:
        ``init_params(rng)`` -> the parameter pytree (``rng`` is a ``jax.random`` key from
            ``config["seed"]``, default 0; every worker starts from the same parameters).
        ``apply(params, x)`` -> the output for a batch ``x``. Pure: no side effects, no
            state read from outside its arguments.
    Optional:
        ``loss(params, x, y)`` -> a scalar; default the mean squared error of ``apply``.
        ``optimizer()`` -> an optax ``GradientTransformation`` (any object with
            ``init(params)`` and ``update(grads, state, params)``), e.g.
            ``optax.adam(self.config["lr"])``; default SGD with step ``config["lr"]``
            (default 0.01). Its state is checkpointed with the parameters.

    ``self.params`` holds the parameters after ``setup()`` (or training / loading).
    """

    params: Any = None

    def init_params(self, rng: Any) -> Any:
        raise ModelDefinitionError(
            f"{type(self).__name__} does not define init_params(rng). Write `def "
            f"init_params(self, rng): return {{'w': jax.random.normal(rng, (n_in, n_out))}}`."
        )

    def apply(self, params: Any, x: Any) -> Any:
        raise ModelDefinitionError(
            f"{type(self).__name__} does not define apply(params, x). Write a pure function "
            f"of its arguments, e.g. `return x @ params['w']`."
        )

    def loss(self, params: Any, x: Any, y: Any) -> Any:
        import jax.numpy as jnp

        out = self.apply(params, x)
        return jnp.mean((out - jnp.reshape(y, out.shape)) ** 2)

    def optimizer(self) -> Any:
        return _Sgd(float(self.config.get("lr", 0.01)))

    def setup(self) -> None:
        import jax

        self.params = self.init_params(jax.random.PRNGKey(int(self.config.get("seed", 0))))

    def forward(self, x: Any) -> Any:
        import numpy as np

        return np.asarray(self.apply(self.params, x))

    # -- framework calls --------------------------------------------------------------------
    @classmethod
    def check_definition(cls) -> None:
        missing = [m for m in ("init_params", "apply") if not _overrides(cls, m, JaxModel)]
        if missing:
            raise ModelDefinitionError(
                f"{cls.__name__} does not define {' and '.join(m + '()' for m in missing)}. A "
                f"JaxModel writes `def init_params(self, rng)` (the parameter pytree) and "
                f"`def apply(self, params, x)` (a pure function)."
            )

    @classmethod
    def check_training_definition(cls) -> None:
        from tandem.train.backends.jax import require_jax

        cls.check_definition()
        require_jax(f"model.train({cls.__name__})")

    @classmethod
    def trainer_class(cls) -> type:
        return JaxModelTrainer

    @classmethod
    def worker_loop(cls) -> Callable[..., Any]:
        return jax_model_loop

    def weights_state(self) -> list[Any]:
        """The params' leaves (``jax.tree_util`` order) as NumPy arrays."""
        import jax
        import numpy as np

        self.ensure_setup()
        return [np.asarray(v) for v in jax.tree_util.tree_leaves(self.params)]

    def load_weights_state(self, state: Any, where: str = "") -> None:
        import jax
        import jax.numpy as jnp

        self.ensure_setup()
        treedef = jax.tree_util.tree_structure(self.params)
        leaves = [jnp.asarray(v) for v in state]
        if len(leaves) != treedef.num_leaves:
            call = f"load_weights({where!r})" if where else "load_weights_state(state)"
            raise ConfigError(
                f"{type(self).__name__}.{call}: the weights hold "
                f"{len(leaves)} arrays but init_params() makes {treedef.num_leaves}; they were "
                f"saved by a model with other parameters."
            )
        self.params = jax.tree_util.tree_unflatten(treedef, leaves)

    def save_weights(self, directory: str) -> None:
        import numpy as np

        np.savez(os.path.join(directory, PARAMS_NPZ), *self.weights_state())

    def load_weights(self, directory: str) -> None:
        import numpy as np

        with np.load(os.path.join(os.fspath(directory), PARAMS_NPZ)) as data:
            leaves = [data[f"arr_{i}"] for i in range(len(data.files))]
        self.load_weights_state(leaves, where=os.fspath(directory))


def save_opt_state(opt_state: object, directory: str) -> None:
    """The optimizer state's leaves (``jax.tree_util`` order) as ``opt_state.npz``."""
    import jax
    import numpy as np

    leaves = jax.tree_util.tree_leaves(opt_state)
    np.savez(os.path.join(directory, OPT_STATE_NPZ), *[np.asarray(v) for v in leaves])


def load_opt_state(model: JaxModel, opt: Any, directory: str) -> Any:
    """The optimizer state saved in ``directory``, in the structure ``opt.init`` gives; a
    fresh ``opt.init(model.params)``, with a warning, when there is none or it does not fit
    (the optimizer was changed)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    fresh = opt.init(model.params)
    path = os.path.join(directory, OPT_STATE_NPZ)
    if not os.path.exists(path):
        return fresh
    leaves, treedef = jax.tree_util.tree_flatten(fresh)
    with np.load(path) as data:
        saved = [data[f"arr_{i}"] for i in range(len(data.files))]
    if len(saved) != len(leaves) or any(
            np.shape(a) != np.shape(b) for a, b in zip(saved, leaves)):
        logger.warning(
            "%s: the checkpoint's optimizer state (%d arrays) does not fit %s's (%d): the "
            "optimizer was changed; it starts afresh.", type(model).__name__, len(saved),
            type(opt).__name__, len(leaves))
        return fresh
    return jax.tree_util.tree_unflatten(
        treedef, [jnp.asarray(a, dtype=jnp.asarray(b).dtype) for a, b in zip(saved, leaves)])


def check_pure(model: JaxModel, x: object, y: object) -> None:
    """The purity check of the module docstring, on ``model.params`` and a batch."""
    import jax
    import numpy as np

    name = type(model).__name__
    params = model.params
    for fn_name, fn, args in (("apply", model.apply, (params, x)),
                              ("loss", model.loss, (params, x, y))):
        try:
            with jax.checking_leaks():
                jax.make_jaxpr(fn)(*args)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise ModelDefinitionError(
                f"{name}.{fn_name} is not a pure JAX function: tracing it with "
                f"jax.make_jaxpr under jax.checking_leaks() failed ({type(e).__name__}: "
                f"{first}). It must compute its result from its arguments with jax.numpy "
                f"only: no Python branching or float()/NumPy on array values (use "
                f"jnp.where / lax.cond), and no storing values outside the function."
            ) from e
        first_out, second_out = fn(*args), fn(*args)
        jitted = jax.jit(fn)(*args)
        leaves = [jax.tree_util.tree_leaves(o) for o in (first_out, second_out, jitted)]
        same = all(len(leaves[0]) == len(other) and all(
            np.allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6, equal_nan=True)
            for a, b in zip(leaves[0], other)) for other in leaves[1:])
        if not same:
            raise ModelDefinitionError(
                f"{name}.{fn_name} is not a pure function: called twice (and once under "
                f"jax.jit) on the same params and batch it returned different values, so it "
                f"reads state that changes between calls (a counter, a global random "
                f"generator, the clock...). Pass everything it depends on as arguments "
                f"(randomness as a jax.random key in params or the batch)."
            )


class JaxModelTrainer(JaxTrainer):
    """``JaxTrainer`` that runs the purity check in its constructor: on the driver, before
    any worker starts (``model.train`` builds the trainer through its public constructor)."""

    def __init__(self, train_loop_per_worker: Any, **kwargs: Any) -> None:
        _check_before_start(train_loop_per_worker, kwargs.get("train_loop_config") or {},
                            kwargs.get("datasets") or {})
        metadata = kwargs.pop("metadata", None)  # Ray's JaxTrainer takes none; model.train's
        super().__init__(train_loop_per_worker, **kwargs)
        self.metadata = dict(metadata or {})


def _check_before_start(fn: object, config: Mapping[str, object], datasets: Mapping[str, object]) -> None:
    import cloudpickle

    payload_bytes = getattr(fn, "args", (None,))[0]
    if not isinstance(payload_bytes, bytes):
        return
    payload = cloudpickle.loads(payload_bytes)
    cls = payload.model_cls
    arrays = datasets.get("train")
    if not isinstance(arrays, Arrays) or payload.data_source is not None or payload.splits:
        raise ConfigError(
            f"{cls.__name__}: a JaxModel takes (X, y) arrays or DataFrames (with "
            f"label_column) in dataset={{'train': ..., 'valid': ...}}; not torch Datasets, "
            f"ray.data Datasets or data classes."
        )
    x, y = float32_arrays(arrays)
    n = payload.settings.batch_size
    model = cls(dict(config))
    model.ensure_setup()
    check_pure(model, x[:n], y[:n])


# -- on each worker --------------------------------------------------------------------------
def jax_model_loop(payload_bytes: bytes, config: dict[str, object]) -> None:
    """The per-worker function of ``model.train`` for a ``JaxModel``."""
    import cloudpickle
    import jax
    import jax.numpy as jnp
    import numpy as np

    from tandem import train
    from tandem.train import Checkpoint

    payload = cloudpickle.loads(payload_bytes)
    settings = payload.settings
    ctx = train.get_context()
    rank, world = ctx.get_world_rank(), ctx.get_world_size()
    model: JaxModel = payload.model_cls(config)
    setup: Any = model.setup  # may be async def
    run_sync(setup())
    model.is_setup = True
    if payload.init_weights is not None:
        model.load_weights_state(payload.init_weights)
    opt = model.optimizer()
    opt_state = opt.init(model.params)
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            model.load_weights(d)
            opt_state = load_opt_state(model, opt, d)
            with open(os.path.join(d, TRAINER_STATE_FILE)) as f:
                start = int(json.load(f)["epoch"])

    shards = rank_datasets(payload.datasets, payload.datasets_to_split, rank, world)
    x, y = float32_arrays(shards["train"])
    bs = settings.batch_size
    steps = max(1, len(x) // bs)  # even shards: the same on every worker
    devices = jax.local_devices()
    n_dev = len(devices)

    def step(params: object, state: object, xb: object, yb: object) -> tuple[Any, Any, Any]:
        value, grads = jax.value_and_grad(model.loss)(params, xb, yb)
        grads = jax.lax.pmean(grads, "i")  # across every device of every worker
        updates, state = opt.update(grads, state, params)
        new = jax.tree_util.tree_map(lambda p, u: p + u, params, updates)
        return new, state, jax.lax.pmean(value, "i")

    pstep = jax.pmap(step, axis_name="i")
    psum = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")

    def replicate(tree: object) -> Any:
        return jax.tree_util.tree_map(lambda a: np.stack([np.asarray(a)] * n_dev), tree)

    params, state = replicate(model.params), replicate(opt_state)
    ident = identity_files(model) if rank == 0 else {}
    per = max(1, min(bs, len(x)) // n_dev)
    for epoch in range(start + 1, settings.num_epochs + 1):
        t0 = time.perf_counter()
        # a function of (seed, rank, epoch): a resumed run reads what an uninterrupted one does
        order = np.random.default_rng([payload.seed, rank, epoch]).permutation(len(x))
        total = 0.0
        for s in range(steps):
            idx = order[s * bs:s * bs + per * n_dev]
            xb = x[idx].reshape((n_dev, per) + x.shape[1:])
            yb = y[idx].reshape((n_dev, per) + y.shape[1:])
            params, state, value = pstep(params, state, xb, yb)
            total += float(value[0])
        train_time = time.perf_counter() - t0
        model.params = jax.tree_util.tree_map(lambda a: a[0], params)
        metrics: dict[str, Any] = {"epoch": epoch, "loss": total / steps}
        if "valid" in shards:
            vx, vy = float32_arrays(shards["valid"])
            local = float(model.loss(model.params, vx, vy)) * len(vx) if len(vx) else 0.0
            sums = psum(jnp.tile(jnp.array([[local, float(len(vx))]]), (n_dev, 1)) / n_dev)
            metrics["val_loss"] = float(sums[0][0] / max(sums[0][1], 1.0))
        metrics["epoch_time_s"] = round(time.perf_counter() - t0, 6)
        metrics["samples_per_s"] = round(steps * bs * world / train_time, 3) if train_time else None
        if rank == 0 and (epoch % settings.checkpoint_every == 0 or epoch == settings.num_epochs):
            d = tempfile.mkdtemp(prefix="tandem-jax-ckpt-")
            try:
                model.save_weights(d)
                save_opt_state(jax.tree_util.tree_map(lambda a: a[0], state), d)
                for fname, blob in ident.items():
                    with open(os.path.join(d, fname), "wb") as fb:
                        fb.write(blob)
                with open(os.path.join(d, TRAINER_STATE_FILE), "w") as f:
                    json.dump({"epoch": epoch, "num_epochs": settings.num_epochs,
                               "seed": payload.seed}, f)
                train.report(metrics, checkpoint=Checkpoint.from_directory(d))
            finally:
                shutil.rmtree(d, ignore_errors=True)
        else:
            train.report(metrics)
