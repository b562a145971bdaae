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
first (tracing and the collective's set-up excluded). tandem and Ray each run in a fresh
python process written as a user writes one (import the trainer, init, fit), so fit 1 is
the first in its process; ``--repeat N`` fits N times in that process (rows ``fit_no``
1..N: tandem imports TensorFlow once, in the process its workers fork from, so its later
fits skip the import; Ray's workers are new processes each fit); ``--rounds N`` starts N
such processes per system, tandem and Ray alternating, so both see the same load. Fit 1's
row also has the import of the trainer's module and the whole program up to fit 1's return
(``import_to_return_s``): Ray imports TensorFlow in the driver at ``from ray.train.tensorflow
import TensorflowTrainer``; tandem begins importing it in its zygote there.

    python benchmarks/backends_bench.py [--only tensorflow|jax] [--no-ray] [--repeat N]
        [--rounds N] [--systems tandem,ray,hand,single] [--json PATH]
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
def session(system: str, backend: str, config: dict, storage: str, repeat: int,
            num_cpus: int) -> list[dict[str, Any]]:
    """One fresh process's program, as a user writes it: import the trainer, init, then
    ``repeat`` fits. Rows: fit call -> return (``fit_s``), steady steps/s, and for fit 1 the
    import of the trainer's module (``import_s``: Ray's imports TensorFlow in the driver;
    tandem's starts importing it in the zygote, ``TANDEM_TF_EARLY_IMPORT``), the init
    (``init_s``) and the whole program up to fit 1's return (``import_to_return_s``)."""
    t0 = time.perf_counter()
    if system == "tandem":
        from tandem.train import RunConfig, ScalingConfig

        if backend == "tensorflow":
            from tandem.train.tensorflow import TensorflowTrainer as Trainer
        else:
            from tandem.train.jax import JaxTrainer as Trainer  # type: ignore[assignment]
        t_import = time.perf_counter()
        import tandem

        tandem.init(num_cpus=num_cpus)
        make_run = lambda: RunConfig(storage_path=storage, verbose=0)  # noqa: E731
        scaling = ScalingConfig(num_workers=2)
        stop = tandem.shutdown
    else:
        import ray
        import ray.train

        if backend == "tensorflow":
            from ray.train.tensorflow import TensorflowTrainer as Trainer  # type: ignore
        else:
            from ray.train.v2.jax import JaxTrainer as Trainer  # type: ignore
        t_import = time.perf_counter()
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                 log_to_driver=False)
        make_run = lambda: ray.train.RunConfig(storage_path=storage)  # type: ignore # noqa: E731
        scaling = ray.train.ScalingConfig(num_workers=2)  # type: ignore[assignment]
        stop = ray.shutdown
    t_init = time.perf_counter()
    fn = tf_train if backend == "tensorflow" else jax_train
    rows: list[dict[str, Any]] = []
    for fit_no in range(1, repeat + 1):
        row: dict[str, Any] = {"fit_no": fit_no, "load_before": round(os.getloadavg()[0], 1)}
        try:
            t = time.perf_counter()
            result = Trainer(fn, train_loop_config={**config, "lib": system, "distributed": True},
                             scaling_config=scaling, run_config=make_run()).fit()
            t_ret = time.perf_counter()
            row.update(fit_s=round(t_ret - t, 2),
                       steps_per_s=round(float(result.metrics["steps_per_s"]), 1))
            if fit_no == 1:
                row.update(import_s=round(t_import - t0, 2), init_s=round(t_init - t_import, 2),
                           import_to_return_s=round(t_ret - t0, 2))
        except Exception as e:  # noqa: BLE001 - a system that fails is a figure too
            row["error"] = f"{type(e).__name__}: {e}"[:300]
        rows.append(row)
    stop()
    return rows


def fresh_session(system: str, backend: str, config: dict, storage: str,
                  repeat: int) -> list[dict[str, Any]]:
    """``session`` in a new python process (the first fit is the first in its process)."""
    out = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--session", system, "--only", backend,
         "--steps", str(config["steps"]), "--epochs", str(config["epochs"]),
         "--repeat", str(repeat), "--storage", storage],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = [line for line in out.stdout.splitlines() if line.startswith("SESSION ")]
    if not lines:
        return [{"fit_no": 1, "error": f"session exited {out.returncode}: "
                                       f"{out.stderr[-300:]}"}]
    return json.loads(lines[-1][8:])


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
                   help="fits per tandem / Ray process (fit 1 is the first in its process)")
    p.add_argument("--rounds", type=int, default=1,
                   help="fresh tandem and Ray processes per backend, alternating")
    p.add_argument("--systems", default=None,
                   help="comma-separated subset: tandem,ray,hand,single (default: all)")
    p.add_argument("--session", choices=["tandem", "ray"], default=None, help=argparse.SUPPRESS)
    p.add_argument("--storage", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    config = {"steps": args.steps, "epochs": args.epochs}
    cpus = os.cpu_count() or 2
    if args.session:  # inside a fresh process started by fresh_session
        rows = session(args.session, args.only or "tensorflow", config,
                       args.storage or tempfile.mkdtemp(prefix="backends-bench-"), args.repeat,
                       cpus)
        print("SESSION " + json.dumps(rows), flush=True)
        return
    storage = tempfile.mkdtemp(prefix="backends-bench-")
    keep = set(args.systems.split(",")) if args.systems else {"tandem", "ray", "hand", "single"}
    if args.no_ray:
        keep.discard("ray")
    rows: list[dict[str, Any]] = []

    def emit(row: dict[str, Any]) -> None:
        rows.append(row)
        print(json.dumps(row), flush=True)

    names = {"tandem": "tandem, 2 workers", "ray": "Ray Train 2.60, 2 workers",
             "hand": "by hand, 2 processes", "single": "one process"}
    for backend in ("tensorflow", "jax"):
        if args.only and backend != args.only:
            continue
        for round_no in range(1, args.rounds + 1):
            for key in ("tandem", "ray"):
                if key not in keep:
                    continue
                load = round(os.getloadavg()[0], 1)
                for row in fresh_session(key, backend, config, os.path.join(storage, key),
                                         args.repeat):
                    emit({"backend": backend, "system": names[key], "round": round_no,
                          "load_at_start": load, **row})
        for key, processes in (("hand", 2), ("single", 1)):
            if key not in keep:
                continue
            load = round(os.getloadavg()[0], 1)
            try:
                seconds, metrics = by_hand(backend, config, processes)
                row = {"fit_s": round(seconds, 2),
                       "steps_per_s": round(float(metrics["steps_per_s"]), 1)}
            except Exception as e:  # noqa: BLE001 - a system that fails is a figure too
                row = {"error": f"{type(e).__name__}: {e}"[:300]}
            emit({"backend": backend, "system": names[key], "fit_no": 1,
                  "load_before": load, **row})
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"config": config, "rows": rows, "cpus": cpus}, f, indent=2)


if __name__ == "__main__":
    main()
