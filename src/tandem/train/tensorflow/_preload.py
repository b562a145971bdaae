"""Imported once in the zygote (the process tandem forks workers from) when a TensorFlow gang
starts that uses Keras 3 (``tf_keras`` not installed, or ``TensorflowConfig(legacy_keras=
False)``): ``import tensorflow`` (20-40 s on a loaded 2-core machine) is then paid once per
cluster, not by every worker of every run. ``_preload_keras2`` is its Keras 2 twin. Both
import it without JAX (``_nojax``).

Forking after the import is safe: TensorFlow creates its thread pools and runtime when the
first op runs, in the worker, after ``TF_CONFIG`` and the thread counts are set; importing
reads neither. It does read ``TF_USE_LEGACY_KERAS`` (``tensorflow.keras``, ``tf.optimizers``
are bound then), so each Keras has its own preload module, and a worker checks that the
TensorFlow it inherited was imported for its Keras (``TensorflowBackend.on_worker_start``).
"""

from __future__ import annotations

import os

from tandem.train.tensorflow._nojax import without_jax

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no start-up lines from the C++ side

with without_jax():
    import tensorflow  # noqa: F401
