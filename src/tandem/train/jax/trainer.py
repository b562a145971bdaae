"""``JaxTrainer``: a ``DataParallelTrainer`` whose workers form one ``jax.distributed``
program (Ray's ``ray.train.v2.jax.JaxTrainer``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.train.api.config import DataConfig, RunConfig, ScalingConfig
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.jax import JaxConfig, require_jax
from tandem.train.v2.api.validation_config import ValidationConfig


class JaxTrainer(DataParallelTrainer):
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` workers after
    ``jax.distributed.initialize`` joined them (rank 0 coordinates): ``jax.devices()`` lists
    every worker's devices and ``jax.lax.psum`` & co. reduce across processes. Ray's
    signature::

        JaxTrainer(train_loop_per_worker, *, train_loop_config=None, jax_config=None,
                   scaling_config=None, dataset_config=None, run_config=None,
                   datasets=None, validation_config=None)

    ``jax_config`` defaults to ``JaxConfig(use_gpu=scaling_config.use_gpu)``.
    ``validation_config``: a ``ValidationConfig``, as for every trainer.
    """

    _backend_config_cls = JaxConfig

    def __init__(
        self,
        train_loop_per_worker: Callable[..., object],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        jax_config: JaxConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        dataset_config: DataConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        validation_config: ValidationConfig | None = None,
    ) -> None:
        require_jax("JaxTrainer")
        if jax_config is not None and not isinstance(jax_config, JaxConfig):
            raise ConfigError(
                f"JaxTrainer(jax_config=...) takes a JaxConfig, got {type(jax_config).__name__}."
            )
        scaling = scaling_config if scaling_config is not None else ScalingConfig()
        if jax_config is None:
            jax_config = JaxConfig(use_gpu=bool(getattr(scaling, "use_gpu", False)))
        super().__init__(
            train_loop_per_worker,
            train_loop_config=train_loop_config,
            backend_config=jax_config,
            scaling_config=scaling,
            run_config=run_config,
            datasets=datasets,
            dataset_config=dataset_config,
            validation_config=validation_config,
        )
