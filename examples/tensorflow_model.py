"""A Keras model trained on 2 workers (MultiWorkerMirroredStrategy), registered and served.

    pip install -e ".[tensorflow]" && pip install --no-deps tf-keras==2.21.0
    python examples/tensorflow_model.py

Trains a small Keras MLP on scikit-learn's digits with model.train (two worker processes
whose gradients are all-reduced by TensorFlow's collective), registers it, serves it over
HTTP (the same request format as a TorchModel: POST {"inputs": [...]}) and asks it for a
few predictions.
"""

from __future__ import annotations

from typing import ClassVar

import httpx
import numpy as np
from sklearn.datasets import load_digits

from tandem import model


class DigitsKeras(model.TensorflowModel):
    default_config: ClassVar[dict] = {"hidden": 64, "lr": 0.05}
    example_input = np.zeros((1, 64), dtype=np.float32)  # put checks predict() on it

    def setup(self):
        import tensorflow as tf

        self.net = tf.keras.Sequential([
            tf.keras.Input((64,)),
            tf.keras.layers.Dense(self.config["hidden"], activation="relu"),
            tf.keras.layers.Dense(10),
        ])

    def compile_settings(self):
        import tensorflow as tf

        return {"optimizer": tf.keras.optimizers.SGD(self.config["lr"], momentum=0.9),
                "loss": tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                "metrics": ["accuracy"]}


def main() -> None:
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype("float32")
    data = {"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])}

    result = model.train(DigitsKeras, dataset=data,
                         train_settings={"num_workers": 2, "num_epochs": 5, "batch_size": 32})
    ref = model.put(result, name="digits-keras")
    handle = model.serve(ref)
    print(f"registered {ref} (val_accuracy {result.metrics['val_accuracy']:.3f}); "
          f"serving at {handle.url}")
    r = httpx.post(handle.url + "/predict", json={"inputs": X[1400:1410].tolist()}, timeout=60)
    print(f"predicted {np.argmax(r.json()['outputs'], axis=1).tolist()}")
    print(f"true      {y[1400:1410].tolist()}")
    handle.stop()


if __name__ == "__main__":
    main()
