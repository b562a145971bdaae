"""A JAX model (a pure function + its parameters) trained on 2 workers, registered, served.

    pip install -e ".[jax]"
    python examples/jax_model.py

Trains softmax regression on scikit-learn's digits with model.train: two worker processes
joined by jax.distributed, each taking SGD steps on its own rows with the gradients
averaged across both (lax.pmean). Then registers it and serves it over HTTP (the same
request format as a TorchModel: POST {"inputs": [...]}).
"""

from __future__ import annotations

from typing import ClassVar

import httpx
import numpy as np
from sklearn.datasets import load_digits

from tandem import model


class DigitsSoftmax(model.JaxModel):
    default_config: ClassVar[dict] = {"lr": 0.5, "seed": 0}
    example_input = np.zeros((1, 64), dtype=np.float32)

    def init_params(self, rng):
        import jax

        return {"w": jax.random.normal(rng, (64, 10)) * 0.01, "b": np.zeros(10, np.float32)}

    def apply(self, params, x):
        return x @ params["w"] + params["b"]  # logits

    def loss(self, params, x, y):
        import jax
        import jax.numpy as jnp

        logp = jax.nn.log_softmax(self.apply(params, x))
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None].astype(jnp.int32), axis=1))


def main() -> None:
    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype("float32")
    data = {"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])}

    result = model.train(DigitsSoftmax, dataset=data,
                         train_settings={"num_workers": 2, "num_epochs": 10, "batch_size": 50})
    trained = result.model
    acc = float((np.argmax(trained.predict(X[1400:]), axis=1) == y[1400:]).mean())
    ref = model.put(result, name="digits-jax")
    handle = model.serve(ref)
    print(f"registered {ref} (val_loss {result.metrics['val_loss']:.3f}, accuracy {acc:.3f}); "
          f"serving at {handle.url}")
    r = httpx.post(handle.url + "/predict", json={"inputs": X[1400:1410].tolist()}, timeout=60)
    print(f"predicted {np.argmax(r.json()['outputs'], axis=1).tolist()}")
    print(f"true      {y[1400:1410].tolist()}")
    handle.stop()


if __name__ == "__main__":
    main()
