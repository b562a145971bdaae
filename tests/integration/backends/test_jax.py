"""JaxTrainer on 2 real worker processes joined by jax.distributed: a psum crosses them, and
a data-parallel step on different data leaves both with the same parameters."""

from __future__ import annotations

import json
import os

import pytest

pytest.importorskip("jax")

from tandem.train import RunConfig, ScalingConfig
from tandem.train.jax import JaxTrainer
from tandem.train.v2.jax import JaxTrainer as V2JaxTrainer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def jax_train(config):
    import jax
    import jax.numpy as jnp
    import numpy as np

    from tandem import train

    rank = train.get_context().get_world_rank()
    # a psum across the processes of the gang
    total = jax.pmap(lambda v: jax.lax.psum(v, "i"), axis_name="i")(jnp.array([rank + 1.0]))
    # one data-parallel SGD step on different data per worker, gradients psum-averaged
    rng = np.random.default_rng(rank)
    x = jnp.asarray(rng.normal(size=(1, 16, 3)), dtype=jnp.float32)
    y = jnp.asarray(rng.normal(size=(1, 16)), dtype=jnp.float32)
    w = jnp.zeros((1, 3))

    def step(w, x, y):
        g = jax.grad(lambda w: jnp.mean((x @ w - y) ** 2))(w)
        return w - 0.1 * jax.lax.pmean(g, "i")

    w = jax.pmap(step, axis_name="i")(w, x, y)
    train.report({"psum": float(total[0]), "processes": jax.process_count()})
    with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
        json.dump({"psum": float(total[0]), "w": np.asarray(w).ravel().tolist(),
                   "devices": len(jax.devices())}, f)


def test_psum_crosses_two_worker_processes(tmp_path, storage):
    assert V2JaxTrainer is JaxTrainer
    result = JaxTrainer(jax_train, train_loop_config={"out": str(tmp_path)},
                        scaling_config=ScalingConfig(num_workers=2),
                        run_config=RunConfig(storage_path=storage, name="jax", verbose=0)).fit()
    r0 = json.loads((tmp_path / "rank0.json").read_text())
    r1 = json.loads((tmp_path / "rank1.json").read_text())
    assert r0["psum"] == r1["psum"] == 3.0  # 1 + 2: each process added its own value
    assert r0["devices"] == r1["devices"] == 2
    assert r0["w"] == r1["w"] and any(v != 0 for v in r0["w"])
    assert result.metrics["processes"] == 2 and result.metrics["psum"] == 3.0
