"""The GPU paths, run for real on a machine with a CUDA GPU.

CI has no GPU, so there every test here is skipped (the CPU paths are tested elsewhere).
On a GPU machine: ``python -m pytest tests/gpu -q``. What a user gets there:

- ``TorchTrainer(..., ScalingConfig(use_gpu=True))``: each worker sees its own GPU through
  ``CUDA_VISIBLE_DEVICES``, the process group is nccl, ``prepare_model`` and
  ``get_device`` put the work on that GPU, and an all-reduce runs on it;
- two workers sharing one GPU (``resources_per_worker={"GPU": 0.5}``) both see it and
  train over gloo (nccl refuses two ranks on one device);
- ``model.train(..., train_settings={"use_gpu": True})`` trains the Model object on the GPU
  and the trained model predicts;
- (the train server's usage sampler on a real GPU: tests/unit/server/test_usage_gpu.py);
- ``XGBoostTrainer(..., use_gpu=True)`` trains with ``device="cuda"``;
- ``model.serve(ref, num_gpus=1)``: the replica holds a GPU (``CUDA_VISIBLE_DEVICES``), the
  ``TorchModel``'s weights are on ``cuda`` there, and its answers equal the CPU model's;
- a tuning sweep of trials on half a GPU each, two at a time: each trial computes on the
  GPU in a fresh process (a worker that made a CUDA context runs no other trial), and the
  trials start in order;
- ``JaxTrainer(..., ScalingConfig(use_gpu=True))``: JAX runs on CUDA;
- a GPU worker that dies restarts (``FailureConfig(max_failures=1)``) from its last
  checkpoint, on the GPU again;
- a ``TorchModel`` trained on the GPU and registered is loaded and predicts, with the same
  answers, in a process that has no GPU (its weights are saved on the CPU).
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]


def _ddp_loop(config):
    import os

    import torch
    import torch.distributed as dist

    from tandem import train
    from tandem.train.torch import get_device, prepare_model

    device = get_device()
    model = prepare_model(torch.nn.Linear(8, 1))
    x = torch.randn(16, 8, device=device)
    model(x).pow(2).mean().backward()
    total = torch.ones(1, device=device) * (train.get_context().get_world_rank() + 1)
    dist.all_reduce(total)
    out = os.path.join(config["out"], f"rank{train.get_context().get_world_rank()}.txt")
    with open(out, "w") as f:
        f.write("|".join([
            dist.get_backend(), str(device), str(next(model.parameters()).device),
            os.environ.get("CUDA_VISIBLE_DEVICES", "-"), str(total.item()),
        ]))
    train.report({"allreduce": float(total.item())})


def _read_ranks(out, n):
    return [(out / f"rank{r}.txt").read_text().split("|") for r in range(n)]


def test_nccl_ddp_each_worker_on_its_gpu(tmp_path):
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    n = torch.cuda.device_count()
    result = TorchTrainer(
        _ddp_loop, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=n, use_gpu=True),
        run_config=RunConfig(storage_path=str(tmp_path / "runs")),
    ).fit()
    assert result.error is None
    ranks = _read_ranks(tmp_path, n)
    for backend, device, param_device, visible, total in ranks:
        assert backend == "nccl"
        assert device.startswith("cuda") and param_device.startswith("cuda")
        assert visible != "-"
        assert float(total) == n * (n + 1) / 2
    # one GPU per worker: no two ranks were given the same device
    assert len({r[3] for r in ranks}) == n


def test_two_workers_share_one_gpu_by_fractions(tmp_path):
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    # nccl refuses two ranks on one device ("Duplicate GPU detected", Ray fails so): the
    # gang sees that its ranks share the GPU and picks gloo
    result = TorchTrainer(
        _ddp_loop, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=2, use_gpu=True,
                                     resources_per_worker={"GPU": 0.5}),
        run_config=RunConfig(storage_path=str(tmp_path / "runs")),
    ).fit()
    assert result.error is None
    ranks = _read_ranks(tmp_path, 2)
    assert [r[0] for r in ranks] == ["gloo", "gloo"]
    assert ranks[0][3] == ranks[1][3] != "-"  # both see the one GPU
    assert all(r[1].startswith("cuda") and r[2].startswith("cuda") for r in ranks)
    assert float(ranks[0][4]) == 3.0


def _digits_mlp():
    """A small classifier of scikit-learn's digits, defined in a function so that it travels
    by value (a process without this test module loads it)."""
    import torch.nn.functional as F

    from tandem import model

    class MLP(model.TorchModel):
        default_config = {"hidden": 64, "lr": 3e-3}  # noqa: RUF012

        def setup(self):
            self.net = torch.nn.Sequential(torch.nn.Linear(64, self.config["hidden"]),
                                           torch.nn.ReLU(),
                                           torch.nn.Linear(self.config["hidden"], 10))

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.cross_entropy(self.forward(x), y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            logits = self.forward(x)
            return {"accuracy": (logits.argmax(1) == y).float().mean(),
                    "on_gpu": torch.tensor(float(x.is_cuda and logits.is_cuda))}

    return MLP


def test_model_object_trains_and_predicts_on_gpu(tmp_path):
    from sklearn.datasets import load_digits

    from tandem import model
    from tandem.train import RunConfig

    MLP = _digits_mlp()

    X, y = load_digits(return_X_y=True)
    X = X / 16.0
    result = model.train(
        MLP, dataset={"train": (X[:1400], y[:1400]), "valid": (X[1400:], y[1400:])},
        train_settings={"num_workers": 1, "use_gpu": True, "num_epochs": 4, "seed": 0},
        run_config=RunConfig(storage_path=str(tmp_path)),
    )
    assert result.metrics["val_on_gpu"] == 1.0
    assert result.metrics["val_accuracy"] > 0.85
    predicted = torch.as_tensor(result.model.predict(X[1400:])).cpu().argmax(1).numpy()
    assert (predicted == y[1400:]).mean() > 0.85


def test_xgboost_trains_on_cuda(tmp_path):
    xgboost = pytest.importorskip("xgboost")
    pynvml = pytest.importorskip("pynvml")
    if not xgboost.build_info().get("USE_CUDA"):
        pytest.skip("this xgboost build has no CUDA")
    import threading

    import numpy as np
    import pandas as pd

    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.xgboost import XGBoostTrainer

    rng = np.random.default_rng(0)
    x = rng.normal(size=(400_000, 16)).astype(np.float32)
    frame = pd.DataFrame(x, columns=[f"f{i}" for i in range(16)])
    frame["y"] = (x[:, 0] + x[:, 1] * x[:, 2] > 0).astype(int)
    # the GPU is busy only if the worker trains there (a CUDA context alone, which a CPU
    # fit can hold too, keeps it at 0 %): watch NVML's utilisation while it trains
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    busiest = [0]
    done = threading.Event()

    def watch():
        while not done.wait(0.05):
            busiest[0] = max(busiest[0], pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = XGBoostTrainer(
            params={"objective": "binary:logistic", "eval_metric": ["error"],
                    "tree_method": "hist", "max_depth": 8},
            label_column="y", num_boost_round=300, datasets={"train": frame},
            scaling_config=ScalingConfig(num_workers=1, use_gpu=True),
            run_config=RunConfig(storage_path=str(tmp_path)),
        ).fit()
    finally:
        done.set()
        watcher.join()
    assert result.metrics["train-error"] < 0.1
    assert busiest[0] > 0, "the GPU stayed idle while XGBoost trained"


def test_serve_places_a_torch_model_replica_on_a_gpu(tmp_path, monkeypatch):
    import os

    import httpx
    import numpy as np

    import tandem
    from tandem import model

    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)

    seen = tmp_path / "replica_env.txt"
    driver_pid = os.getpid()

    class Lin(model.TorchModel):
        example_input = np.zeros((1, 8), dtype=np.float32)

        def setup(self):
            import os

            torch.manual_seed(0)
            self.net = torch.nn.Linear(8, 3)
            if os.getpid() != driver_pid:
                # a forked replica's /proc/<pid>/environ shows the zygote's environment,
                # not what the replica set: the replica says what it sees
                seen.write_text(os.environ.get("CUDA_VISIBLE_DEVICES", "-"))

        def forward(self, x):
            return self.net(x)

    m = Lin()
    m.ensure_setup()
    ref = model.put(m, name="lin")
    tandem.init(num_cpus=2)
    x = np.random.default_rng(0).normal(size=(4, 8)).astype(np.float32)
    with model.serve(ref, num_gpus=1) as handle:
        info = httpx.get(handle.url).json()
        r = httpx.post(handle.url + "/predict", json={"inputs": x.tolist()}, timeout=60)
        pid = next(iter(handle.status()["pids"].values()))
    assert r.status_code == 200, r.text
    assert info["replica_devices"] == ["cuda:0"]
    assert pid != driver_pid
    assert seen.read_text() not in ("", "-", "-1")
    np.testing.assert_allclose(np.array(r.json()["outputs"]), m.predict(x).numpy(), atol=1e-4)


def _gpu_trial(config):
    import os

    import torch

    from tandem import tune

    # what the previous trial in this (reused) worker left on the GPU
    left_over = torch.cuda.memory_allocated()
    block = torch.full((64, 1024, 1024), float(config["x"]), device="cuda")  # 256 MB
    tune.report({"total": float(block.sum().item()) / block.numel(), "left_over": left_over,
                 "device": str(block.device), "pid": os.getpid(),
                 "visible": os.environ.get("CUDA_VISIBLE_DEVICES", "-")})


def test_tune_trials_share_the_gpu_each_in_a_fresh_process(tmp_path):
    from tandem import tune
    from tandem.train import RunConfig

    class StartOrder(tune.Callback):
        started: list = []  # noqa: RUF012

        def on_trial_start(self, iteration, trials, trial, **info):
            self.started.append(trial.config["x"])

    # two at a time on half a GPU each; a worker that made a CUDA context runs no other
    # trial (a fresh process would hold no GPU memory), so each trial gets a fresh one,
    # nothing is handed ahead, and the trials start in order
    results = tune.Tuner(
        tune.with_resources(_gpu_trial, {"cpu": 1, "gpu": 0.5}),
        param_space={"x": tune.grid_search([1, 2, 3, 4, 5, 6])},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=RunConfig(storage_path=str(tmp_path), callbacks=[StartOrder()]),
    ).fit()
    assert not results.errors
    rows = sorted((r.config["x"], r.metrics) for r in results)
    assert [x for x, _ in rows] == [1, 2, 3, 4, 5, 6]
    for x, m in rows:
        assert m["total"] == float(x)
        assert m["device"].startswith("cuda")
        assert m["visible"] not in ("-", "")
        assert m["left_over"] == 0, f"trial x={x} found {m['left_over']} bytes on the GPU"
    assert len({m["pid"] for _, m in rows}) == 6
    assert StartOrder.started == [1, 2, 3, 4, 5, 6]


def _jax_loop(config):
    import jax
    import jax.numpy as jnp

    from tandem import train

    device = jax.devices()[0]
    y = jax.jit(lambda a: (a @ a.T).sum())(jnp.ones((256, 128)))
    train.report({"platform": device.platform, "value": float(y),
                  "on": str(next(iter(y.devices())).platform)})


def test_jax_trainer_runs_on_the_gpu(tmp_path):
    pytest.importorskip("jax")
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.jax import JaxTrainer

    result = JaxTrainer(
        _jax_loop, scaling_config=ScalingConfig(num_workers=1, use_gpu=True),
        run_config=RunConfig(storage_path=str(tmp_path)),
    ).fit()
    assert result.error is None
    assert result.metrics["platform"] == "gpu"
    assert result.metrics["on"] == "gpu"
    assert result.metrics["value"] == 256 * 256 * 128.0


def _crash_once(config):
    import os
    import tempfile

    import torch

    from tandem import train
    from tandem.train import Checkpoint
    from tandem.train.torch import get_device, prepare_model

    with open(os.path.join(config["out"], "starts"), "a") as f:
        f.write("start\n")
    device = get_device()
    model = prepare_model(torch.nn.Linear(4, 1))
    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            state = torch.load(os.path.join(d, "state.pt"), map_location=device)
        start = state["epoch"] + 1
        model.load_state_dict(state["model"])
    for epoch in range(start, 4):
        model(torch.randn(8, 4, device=device)).pow(2).mean().backward()
        with tempfile.TemporaryDirectory() as d:
            torch.save({"epoch": epoch, "model": model.state_dict()},
                       os.path.join(d, "state.pt"))
            train.report({"epoch": epoch, "device": str(next(model.parameters()).device)},
                         checkpoint=Checkpoint.from_directory(d))
        crashed = os.path.join(config["out"], "crashed")
        if epoch == 1 and not os.path.exists(crashed):
            open(crashed, "w").close()
            os._exit(1)  # the worker dies: the gang restarts from the last checkpoint


def test_a_crashed_gpu_gang_restarts_from_its_checkpoint_on_the_gpu(tmp_path):
    from tandem.train import FailureConfig, RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    result = TorchTrainer(
        _crash_once, train_loop_config={"out": str(tmp_path)},
        scaling_config=ScalingConfig(num_workers=1, use_gpu=True),
        run_config=RunConfig(storage_path=str(tmp_path / "runs"),
                             failure_config=FailureConfig(max_failures=1)),
    ).fit()
    assert result.error is None
    assert (tmp_path / "starts").read_text().count("start") == 2  # crashed once, restarted
    assert result.metrics["epoch"] == 3
    assert result.metrics["device"].startswith("cuda")


def test_a_model_trained_on_the_gpu_predicts_in_a_process_without_one(tmp_path, monkeypatch):
    import json
    import os
    import subprocess
    import sys

    import numpy as np
    from sklearn.datasets import load_digits

    from tandem import model
    from tandem.train import RunConfig

    monkeypatch.setenv("TANDEM_MODELS_PATH", str(tmp_path / "models"))

    X, y = load_digits(return_X_y=True)
    X = (X / 16.0).astype(np.float32)
    result = model.train(
        _digits_mlp(), dataset={"train": (X[:1400], y[:1400])},
        train_settings={"num_workers": 1, "use_gpu": True, "num_epochs": 3, "seed": 0},
        run_config=RunConfig(storage_path=str(tmp_path / "runs")),
    )
    model.put(result.model, name="digits")
    here = torch.as_tensor(result.model.predict(X[1400:1410])).cpu().numpy()
    code = ("import json, sys, numpy as np, torch\n"
            "from tandem import model\n"
            "assert not torch.cuda.is_available()\n"
            "m = model.get('digits')\n"
            "x = np.array(json.loads(sys.stdin.read()), dtype=np.float32)\n"
            "print(json.dumps(torch.as_tensor(m.predict(x)).tolist()))\n")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(X[1400:1410].tolist()),
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    there = np.array(json.loads(proc.stdout.strip().splitlines()[-1]))
    np.testing.assert_allclose(there, here, atol=1e-4)
