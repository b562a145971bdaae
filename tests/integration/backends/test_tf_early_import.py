"""TensorFlow's import starts early: ``import tandem.train.tensorflow`` starts the zygote (the
process workers fork from) and has it import TensorFlow while the program goes on; the
cluster adopts that zygote, or ends it when the environment changed or nobody used it.

tests/conftest.py sets ``TANDEM_TF_EARLY_IMPORT=0`` for the session; these tests turn it on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

import tandem
from tandem import train
from tandem.cluster.local import discard_early_zygote, early_zygote_modules, start_zygote_early
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig
from tests.helpers.zygotes import zygotes

needs_tf = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                              reason="needs the tensorflow extra")


def _parent_of_worker(storage: str) -> tuple[int, str | None]:
    def fn():
        train.report({"ppid": os.getppid(), "x": os.environ.get("TANDEM_TEST_EARLY_X")})

    result = DataParallelTrainer(fn, scaling_config=ScalingConfig(num_workers=1),
                                 run_config=RunConfig(storage_path=storage, verbose=0)).fit()
    return int(result.metrics["ppid"]), result.metrics["x"]


def test_a_zygote_started_early_is_adopted_unless_the_environment_changed(storage, monkeypatch):
    # a driver may import the workers' module (a test process does): that makes it no worker
    import tandem.cluster._worker_main  # noqa: F401

    # adopted: the run's worker is forked from the zygote started before tandem.init
    assert start_zygote_early(("json",))
    early = zygotes()
    assert len(early) == 1 and early_zygote_modules() == ("json",)
    tandem.init(num_cpus=2)
    ppid, _ = _parent_of_worker(storage)
    assert ppid == early[0].pid
    assert early_zygote_modules() is None
    tandem.shutdown()

    # the environment changed after it started: a fresh zygote, whose workers see the change
    assert start_zygote_early(("json",))
    stale = zygotes()[0]
    monkeypatch.setenv("TANDEM_TEST_EARLY_X", "set after the early start")
    tandem.init(num_cpus=2)
    ppid, x = _parent_of_worker(storage)
    assert ppid != stale.pid and x == "set after the early start"
    stale.wait(timeout=30)  # ended, not left behind
    tandem.shutdown()

    # never adopted: tandem.shutdown ends it
    assert start_zygote_early(("json",))
    unused = zygotes()[0]
    tandem.shutdown()
    unused.wait(timeout=30)
    assert early_zygote_modules() is None


@needs_tf
def test_import_tensorflow_early_follows_settings_and_keras(monkeypatch):
    from tandem.train.backends.tensorflow import import_tensorflow_early

    monkeypatch.setenv("TANDEM_TF_EARLY_IMPORT", "0")
    assert not import_tensorflow_early() and not zygotes()
    monkeypatch.setenv("TANDEM_TF_EARLY_IMPORT", "1")
    monkeypatch.setenv("TANDEM_ADDRESS", "http://127.0.0.1:9")  # jobs go to a server
    assert not import_tensorflow_early() and not zygotes()
    monkeypatch.delenv("TANDEM_ADDRESS")
    monkeypatch.delenv("TF_USE_LEGACY_KERAS", raising=False)
    try:
        assert import_tensorflow_early(legacy_keras=True)
        first = zygotes()
        assert early_zygote_modules()[-1] == "tandem.train.tensorflow._preload_keras2"
        # a trainer that wants the other Keras replaces it (TensorFlow binds Keras at import)
        assert import_tensorflow_early(legacy_keras=False)
        assert early_zygote_modules()[-1] == "tandem.train.tensorflow._preload"
        first[0].wait(timeout=30)
        assert len(zygotes()) == 1
        # the same once tandem.init ran but before the cluster started its zygote
        assert import_tensorflow_early(legacy_keras=True)
        keras2 = zygotes()
        tandem.init(num_cpus=2)
        assert import_tensorflow_early(legacy_keras=False)
        keras2[0].wait(timeout=30)
        assert len(zygotes()) == 1 and early_zygote_modules() is None  # adopted
    finally:
        discard_early_zygote()
        tandem.shutdown()
    assert not zygotes()


PROGRAM = textwrap.dedent("""
    import json, os, sys, time
    import psutil
    from tandem.train.tensorflow import TensorflowTrainer  # starts TensorFlow's import
    from tandem.train import RunConfig, ScalingConfig
    import tandem

    zygotes = [p for p in psutil.Process().children()
               if "tandem.cluster._zygote" in " ".join(p.cmdline())]
    assert len(zygotes) == 1, zygotes
    # TensorFlow's library is loaded in the zygote before fit() is called
    deadline = time.monotonic() + 240
    while not any("libtensorflow" in m.path for m in zygotes[0].memory_maps(grouped=True)):
        assert time.monotonic() < deadline, "the zygote never loaded TensorFlow"
        time.sleep(0.05)

    def fn(config):
        import numpy as np
        import tensorflow as tf
        from tandem import train
        rank = train.get_context().get_world_rank()
        strategy = tf.distribute.MultiWorkerMirroredStrategy()
        with strategy.scope():
            model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
            model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
        rng = np.random.default_rng(100 + rank)  # different data on each worker
        x = rng.normal(size=(16, 4)).astype("float32")
        y = rng.normal(size=(16, 1)).astype("float32")
        options = tf.data.Options()
        options.experimental_distribute.auto_shard_policy = (
            tf.data.experimental.AutoShardPolicy.OFF)
        ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16).with_options(options)
        model.fit(ds, epochs=1, verbose=0)
        with open(os.path.join(config["out"], f"rank{rank}.json"), "w") as f:
            json.dump({"weights": [w.ravel().tolist() for w in model.get_weights()],
                       "ppid": os.getppid()}, f)

    tandem.init(num_cpus=2)
    TensorflowTrainer(fn, train_loop_config={"out": sys.argv[1]},
                      scaling_config=ScalingConfig(num_workers=2),
                      run_config=RunConfig(storage_path=sys.argv[2], verbose=0)).fit()
    print(json.dumps({"zygote": zygotes[0].pid, "tf_in_driver": "tensorflow" in sys.modules}))
    tandem.shutdown()
""")


@needs_tf
@pytest.mark.slow
@pytest.mark.timeout(420)
@pytest.mark.skipif(importlib.util.find_spec("tf_keras") is None,
                    reason="needs tf-keras (Keras 2) for fit under MWMS")
def test_first_fit_in_a_process_forks_from_the_zygote_its_import_started(tmp_path, storage):
    env = {**os.environ, "TANDEM_TF_EARLY_IMPORT": "1", "TANDEM_ADDRESS": "local"}
    out = subprocess.run([sys.executable, "-c", PROGRAM, str(tmp_path), storage], env=env,
                         capture_output=True, text=True, timeout=400)
    assert out.returncode == 0, out.stderr[-3000:]
    run = json.loads(out.stdout.strip().splitlines()[-1])
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    # both workers forked from the zygote the import started; the driver never imported TF
    assert [r["ppid"] for r in ranks] == [run["zygote"]] * 2
    assert run["tf_in_driver"] is False
    # the gradients were all-reduced: different data on each worker, identical weights
    assert ranks[0]["weights"] == ranks[1]["weights"]
