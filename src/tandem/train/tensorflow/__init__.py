"""TensorFlow on tandem: ``TensorflowTrainer`` (``MultiWorkerMirroredStrategy`` across the
gang), ``TensorflowConfig``, ``prepare_dataset_shard`` and ``TensorflowCheckpoint``: Ray's
``ray.train.tensorflow``.

Importing this module checks that TensorFlow is installed (as Ray's does) but does not
import it: the driver never needs it. It does begin importing TensorFlow in the process the
workers will fork from (``import_tensorflow_early``; ``TANDEM_TF_EARLY_IMPORT=0`` turns that
off), so the first ``fit`` does not wait for the whole import.
"""

from __future__ import annotations

from tandem.train.backends.tensorflow import (
    TensorflowConfig,
    import_tensorflow_early,
    require_tensorflow,
)

require_tensorflow("tandem.train.tensorflow")
import_tensorflow_early()

from tandem.train.tensorflow.checkpoint import TensorflowCheckpoint
from tandem.train.tensorflow.trainer import TensorflowTrainer, prepare_dataset_shard

__all__ = ["TensorflowCheckpoint", "TensorflowConfig", "TensorflowTrainer", "prepare_dataset_shard"]
