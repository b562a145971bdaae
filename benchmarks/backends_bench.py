"""TensorFlow and JAX, side by side in one run: tandem (2 workers) vs Ray Train (2 workers)
vs a hand-launched 2-process program vs one process.

TensorFlow: a Keras MLP (32 -> 128 -> 10) on generated data, per-worker batch 64,
``--steps`` steps per epoch, ``--epochs`` epochs, ``MultiWorkerMirroredStrategy`` across the
2 workers (Keras 2, ``tf_keras``: Keras 3 cannot fit under it).

- ``tandem``: ``TensorflowTrainer``, 2 workers (``TF_CONFIG`` from tandem);
- ``Ray``: Ray Train 2.60's ``TensorflowTrainer`` (``TF_CONFIG`` from Ray), on a Ray
  instance started before timing (its start-up is printed, not counted), with the same
  relaxed health checks as ``trees_bench.py`` (``RAY_ENV``);
- ``by hand``: the same function in 2 plain ``python`` processes given ``TF_CONFIG`` by this
  script (what a user writes without a framework);
- ``one process``: the same model without a strategy, 1 process.

JAX: a 2-layer MLP's SGD step under ``jax.pmap`` with ``lax.pmean`` of the gradients:

- ``tandem``: ``JaxTrainer``, 2 workers joined by ``jax.distributed`` (the pmean crosses
  the processes);
- ``Ray``: Ray Train V2's ``JaxTrainer`` on CPU, which does *not* join the workers (Ray sets
  up ``jax.distributed`` only for TPU/GPU): two independent programs;
- ``by hand``: 2 processes calling ``jax.distributed.initialize`` themselves;
- ``one process``.

Two figures per system: call -> return of the whole fit (``fit()`` / the processes' exit),
and steady-state steps/s, measured inside the train function over every epoch after the
first (tracing and the collective's set-up excluded). ``--repeat N`` fits N times in the same
session with tandem and Ray (rows ``fit_no`` 1..N): tandem imports TensorFlow once, in the
process its workers fork from, so its later fits skip the import; Ray's workers are new
processes each fit.

    python benchmarks/backends_bench.py [--only tensorflow|jax] [--no-ray] [--repeat N]
        [--systems tandem,ray,hand,single] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

RAY_ENV = {
    "RAY_TRAIN_V2_ENABLED": "1",
    "RAY_health_check_period_ms": "10000",
    "RAY_health_check_timeout_ms": "60000",
    "RAY_health_check_failure_threshold": "30",
    "RAY_TRAIN_WORKER_HEALTH_CHECK_TIMEOUT_S": "1800",
    "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "600",
    "RAY_memory_monitor_refresh_ms": "0",
}
for _key, _value in {**RAY_ENV, "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2",
                     "JAX_PLATFORMS": "cpu"}.items():
    os.environ.setdefault(_key, _value)


# -- the train functions (the same code for every system) ----------------------------------
def _report(config: dict, metrics: dict) -> None:
    lib = config.get("lib")
    if lib == "tandem":
        from tandem import train

        train.report(metrics)
    elif lib == "ray":
        import tempfile

        import ray.train

        # Ray Train V2 keeps a report's metrics in Result.metrics only with a checkpoint
        d = tempfile.mkdtemp()
        with open(os.path.join(d, "metrics.json"), "w") as f:
            json.dump(metrics, f)
        ray.train.report(metrics, checkpoint=ray.train.Checkpoint.from_directory(d))
    else:  # a plain process: print it
        print("BENCH " + json.dumps(metrics), flush=True)


def tf_train(config: dict) -> None:
    import numpy as np
    import tensorflow as tf

    workers = len(json.loads(os.environ["TF_CONFIG"])["cluster"]["worker"]) \
        if config.get("distributed") else 1
    strategy = tf.distribute.MultiWorkerMirroredStrategy() if config.get("distributed") \
        else tf.distribute.get_strategy()
    tf.keras.utils.set_random_seed(0)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((32,)),
                                     tf.keras.layers.Dense(128, activation="relu"),
                                     tf.keras.layers.Dense(10)])
        model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4096, 32)).astype("float32")
    y = rng.integers(0, 10, size=4096)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
    ds = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(64 * workers)
    ds = ds.with_options(options)
    times: list[float] = []

    class Timer(tf.keras.callbacks.Callback):
        def on_epoch_begin(self, epoch: int, logs: Any = None) -> None:
            times.append(time.perf_counter())

    steps = config["steps"]
    history = model.fit(ds, epochs=config["epochs"], steps_per_epoch=steps, verbose=0,
                        callbacks=[Timer()])
    end = time.perf_counter()
    steady = (len(times) - 1) * steps / (end - times[1]) if len(times) > 1 else None
    _report(config, {"steps_per_s": steady, "loss": float(history.history["loss"][-1])})


def jax_train(config: dict) -> None:
    import jax
    import jax.numpy as jnp
    import numpy as np

    rng = np.random.default_rng(0)
    x = rng.normal(size=(1, 64, 32)).astype("float32")
    y = rng.normal(size=(1, 64, 10)).astype("float32")
    params = {"w1": np.full((1, 32, 128), 0.01, np.float32),
              "w2": np.full((1, 128, 10), 0.01, np.float32)}

    def loss(p: Any, x: Any, y: Any) -> Any:
        return jnp.mean((jnp.tanh(x @ p["w1"]) @ p["w2"] - y) ** 2)

    def step(p: Any, x: Any, y: Any) -> Any:
        g = jax.lax.pmean(jax.grad(loss)(p, x, y), "i")
        return jax.tree_util.tree_map(lambda a, b: a - 0.01 * b, p, g)

    pstep = jax.pmap(step, axis_name="i")
    params = pstep(params, x, y)  # compile
    jax.block_until_ready(params)
    t0 = time.perf_counter()
    n = config["steps"] * (config["epochs"] - 1)
    for _ in range(n):
        params = pstep(params, x, y)
    jax.block_until_ready(params)
    _report(config, {"steps_per_s": n / (time.perf_counter() - t0),
                     "processes": jax.process_count()})


# -- the systems ---------------------------------------------------------------------------
def tandem_fit(backend: str, config: dict, storage: str) -> tuple[float, dict]:
    from tandem.train import RunConfig, ScalingConfig

    if backend == "tensorflow":
        from tandem.train.tensorflow import TensorflowTrainer as Trainer
        fn = tf_train
    else:
        from tandem.train.jax import JaxTrainer as Trainer  # type: ignore[assignment]
        fn = jax_train
    t0 = time.perf_counter()
    result = Trainer(fn, train_loop_config={**config, "lib": "tandem", "distributed": True},
                     scaling_config=ScalingConfig(num_workers=2),
                     run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    return time.perf_counter() - t0, dict(result.metrics)


def ray_fit(backend: str, config: dict, storage: str) -> tuple[float, dict]:
    import ray.train

    if backend == "tensorflow":
        from ray.train.tensorflow import TensorflowTrainer as Trainer
        fn = tf_train
    else:
        from ray.train.v2.jax import JaxTrainer as Trainer  # type: ignore[assignment]
        fn = jax_train
    t0 = time.perf_counter()
    result = Trainer(fn, train_loop_config={**config, "lib": "ray", "distributed": True},
                     scaling_config=ray.train.ScalingConfig(num_workers=2),
                     run_config=ray.train.RunConfig(storage_path=storage)).fit()
    return time.perf_counter() - t0, dict(result.metrics)


def by_hand(backend: str, config: dict, processes: int) -> tuple[float, dict]:
    """``processes`` plain python processes running the train function; for 2, given
    ``TF_CONFIG`` / calling ``jax.distributed.initialize`` as a user would by hand."""
    import socket

    ports = []
    for _ in range(processes):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            ports.append(s.getsockname()[1])
    code = (
        "import json, os, sys\n"
        f"sys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})\n"
        "from benchmarks.backends_bench import tf_train, jax_train\n"
        "rank, world, port = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]\n"
        "config = json.loads(sys.argv[4])\n"
        "if sys.argv[5] == 'jax':\n"
        "    import jax\n"
        "    if world > 1:\n"
        "        jax.distributed.initialize('127.0.0.1:' + port, world, rank)\n"
        "    jax_train(config)\n"
        "else:\n"
        "    tf_train(config)\n"
    )
    workers = [f"127.0.0.1:{p}" for p in ports]
    cfg = json.dumps({**config, "lib": None, "distributed": processes > 1})
    t0 = time.perf_counter()
    procs = []
    for rank in range(processes):
        env = dict(os.environ, TF_CONFIG=json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": rank}}))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", code, str(rank), str(processes), str(ports[0]), cfg, backend],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True))
    outs = [p.communicate()[0] for p in procs]
    elapsed = time.perf_counter() - t0
    lines = [line for line in outs[0].splitlines() if line.startswith("BENCH ")]
    if not lines:
        raise RuntimeError(f"{backend} by hand ({processes}) printed no figures")
    return elapsed, json.loads(lines[-1][6:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", choices=["tensorflow", "jax"], default=None)
    p.add_argument("--no-ray", action="store_true")
    p.add_argument("--steps", type=int, default=50, help="steps per epoch")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--json", default=None, metavar="PATH")
    p.add_argument("--repeat", type=int, default=1,
                   help="fits per system with tandem and Ray, in the same session")
    p.add_argument("--systems", default=None,
                   help="comma-separated subset: tandem,ray,hand,single (default: all)")
    args = p.parse_args()
    config = {"steps": args.steps, "epochs": args.epochs}
    storage = tempfile.mkdtemp(prefix="backends-bench-")
    if not args.no_ray and (not args.systems or "ray" in args.systems):
        import ray

        t0 = time.perf_counter()
        ray.init(address="local", num_cpus=os.cpu_count() or 2, include_dashboard=False,
                 log_to_driver=False)
        print(f"Ray started in {time.perf_counter() - t0:.1f} s (not counted)", flush=True)
    import tandem

    tandem.init(num_cpus=os.cpu_count() or 2)
    rows: list[dict[str, Any]] = []
    for backend in ("tensorflow", "jax"):
        if args.only and backend != args.only:
            continue
        systems: list[tuple[str, str, Any]] = [
            ("tandem", "tandem, 2 workers",
             lambda b=backend: tandem_fit(b, config, os.path.join(storage, "tandem"))),
            ("hand", "by hand, 2 processes", lambda b=backend: by_hand(b, config, 2)),
            ("single", "one process", lambda b=backend: by_hand(b, config, 1)),
        ]
        if not args.no_ray and (not args.systems or "ray" in args.systems):
            systems.insert(1, ("ray", "Ray Train 2.60, 2 workers",
                               lambda b=backend: ray_fit(b, config, os.path.join(storage, "ray"))))
        if args.systems:
            keep = set(args.systems.split(","))
            systems = [s for s in systems if s[0] in keep]
        for key, name, run in systems:
            for fit_no in range(1, (args.repeat if key in ("tandem", "ray") else 1) + 1):
                load = round(os.getloadavg()[0], 1)
                try:
                    seconds, metrics = run()
                    row = {"backend": backend, "system": name, "fit_no": fit_no,
                           "fit_s": round(seconds, 2),
                           "steps_per_s": round(float(metrics["steps_per_s"]), 1)}
                except Exception as e:  # noqa: BLE001 - a system that fails is a figure too
                    row = {"backend": backend, "system": name, "fit_no": fit_no,
                           "error": f"{type(e).__name__}: {e}"[:300]}
                row["load_before"] = load
                rows.append(row)
                print(json.dumps(row), flush=True)
    tandem.shutdown()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": config, "rows": rows, "cpus": os.cpu_count()}, f, indent=2)


if __name__ == "__main__":
    main()
