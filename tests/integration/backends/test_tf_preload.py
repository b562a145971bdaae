"""The zygote's TensorFlow preload leaves JAX out (TFLite's only use of it) and JAX still
works afterwards in the same process, as in a worker forked from it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240), pytest.mark.skipif(
    importlib.util.find_spec("tensorflow") is None or importlib.util.find_spec("jax") is None,
    reason="needs the tensorflow and jax extras")]

PROGRAM = """
import sys
import tandem.train.tensorflow.{module}
print("jax after preload:", "jax" in sys.modules)
import tensorflow as tf
print("tf sum:", int(tf.reduce_sum(tf.constant([1, 2, 3]))))
import jax.numpy as jnp
print("jax sum:", int(jnp.arange(4).sum()))
"""


def test_tensorflow_preload_skips_jax_and_jax_still_imports():
    # the preload a TensorFlow gang uses by default (Keras 2 where tf-keras is installed);
    # the other one wraps its import the same way
    module = "_preload_keras2" if importlib.util.find_spec("tf_keras") else "_preload"
    out = subprocess.run([sys.executable, "-c", PROGRAM.format(module=module)],
                         capture_output=True, text=True, timeout=200)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "jax after preload: False" in out.stdout
    assert "tf sum: 6" in out.stdout and "jax sum: 6" in out.stdout
