"""``_preload`` for gangs that use Keras 2 (``tf_keras``, the default when it is installed):
TensorFlow is imported with ``TF_USE_LEGACY_KERAS=1``, which it reads at import, then
``tf.keras`` (``tf_keras`` here) is loaded. The variable is put back as it was afterwards,
so other workers forked from the same process do not inherit it."""

from __future__ import annotations

import os

from tandem.train.tensorflow._nojax import without_jax

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # no start-up lines from the C++ side
_saved = os.environ.get("TF_USE_LEGACY_KERAS")
os.environ["TF_USE_LEGACY_KERAS"] = "1"
try:
    with without_jax():
        import tensorflow

        tensorflow.keras.layers  # noqa: B018 - tf.keras is tf_keras here: Keras 2 imported once
finally:
    if _saved is None:
        os.environ.pop("TF_USE_LEGACY_KERAS", None)
    else:
        os.environ["TF_USE_LEGACY_KERAS"] = _saved
