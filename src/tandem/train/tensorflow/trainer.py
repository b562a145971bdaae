"""``TensorflowTrainer``: a ``DataParallelTrainer`` whose workers form one
``MultiWorkerMirroredStrategy`` collective (``TF_CONFIG`` set per rank)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from tandem._core.errors import ConfigError
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import DataConfig, RunConfig, ScalingConfig
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.tensorflow import (
    TensorflowConfig,
    import_tensorflow_early,
    require_tensorflow,
)
from tandem.train.v2.api.validation_config import ValidationConfig


class TensorflowTrainer(DataParallelTrainer):
    """Runs ``train_loop_per_worker`` on ``scaling_config.num_workers`` workers, each with
    ``TF_CONFIG`` naming every worker of the gang, so a
    ``tf.distribute.MultiWorkerMirroredStrategy()`` created in the function all-reduces
    gradients across them. Ray's signature::

        TensorflowTrainer(train_loop_per_worker, *, train_loop_config=None,
                          tensorflow_config=None, scaling_config=None, dataset_config=None,
                          run_config=None, datasets=None, metadata=None,
                          resume_from_checkpoint=None)

    Build and compile the model inside ``strategy.scope()``; report with
    ``tandem.air.integrations.keras.ReportCheckpointCallback`` (or ``train.report``).
    """

    _backend_config_cls = TensorflowConfig

    def __init__(
        self,
        train_loop_per_worker: Callable[..., object],
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        tensorflow_config: TensorflowConfig | None = None,
        scaling_config: ScalingConfig | None = None,
        dataset_config: DataConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        metadata: Mapping[str, Any] | None = None,
        resume_from_checkpoint: Checkpoint | None = None,
        validation_config: ValidationConfig | None = None,
    ) -> None:
        require_tensorflow("TensorflowTrainer")
        if tensorflow_config is not None and not isinstance(tensorflow_config, TensorflowConfig):
            raise ConfigError(
                f"TensorflowTrainer(tensorflow_config=...) takes a TensorflowConfig, got "
                f"{type(tensorflow_config).__name__}."
            )
        config = tensorflow_config or TensorflowConfig()
        super().__init__(
            train_loop_per_worker,
            train_loop_config=train_loop_config,
            backend_config=config,
            scaling_config=scaling_config,
            run_config=run_config,
            datasets=datasets,
            dataset_config=dataset_config,
            resume_from_checkpoint=resume_from_checkpoint,
            metadata=metadata,
            validation_config=validation_config,
        )
        # the zygote imports TensorFlow (with this config's Keras) while fit() is still on
        # its way; a no-op when the import of tandem.train.tensorflow already started it
        import_tensorflow_early(config.legacy_keras)


def prepare_dataset_shard(tf_dataset_shard: Any) -> Any:
    """Ray's: the ``tf.data.Dataset`` of an already-sharded dataset with TensorFlow's
    auto-sharding turned off (every worker keeps all of its own rows) and prefetching on."""
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    return tf_dataset_shard.with_options(options).prefetch(tf.data.AUTOTUNE)
