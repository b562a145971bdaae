"""``without_jax``: import TensorFlow without the JAX import it does not need."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def without_jax() -> Iterator[None]:
    """``import tensorflow`` imports JAX when it is installed, only for TFLite's converter of
    JAX functions (``tensorflow.lite.python.util``: ``try: from jax import jit``); that is
    4 s (12 s on a loaded machine) of a session's first TensorFlow fit. While TensorFlow is
    imported under this, ``import jax`` fails as if JAX were absent; afterwards it works
    again, so a worker that uses JAX still imports it. Only TFLite's conversion of JAX
    functions stays off in the workers forked from the process. Where JAX was already
    imported nothing changes."""
    if "jax" in sys.modules:
        yield
        return
    sys.modules["jax"] = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if "jax" in sys.modules and sys.modules["jax"] is None:
            del sys.modules["jax"]
