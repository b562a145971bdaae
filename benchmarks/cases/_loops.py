"""Train functions shared by tandem and Ray Train V2 variants.

Each function takes ``config["framework"]`` (``"tandem"`` or ``"ray"``) and imports that
system's ``train`` module, so both systems run the same code line for line; the only
difference is the import. Files named in the config (``out``, ``marker``, ...) carry the
figures back, because Ray Train V2 does not put reports without a checkpoint in
``Result.metrics``.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.cases._common import write_json


def train_api(framework: str) -> Any:
    """The ``train`` module of ``framework`` (``tandem.train`` or ``ray.train``)."""
    if framework == "tandem":
        from tandem import train
    elif framework == "ray":
        from ray import train
    else:
        raise ValueError(f"framework must be 'tandem' or 'ray', got {framework!r}")
    return train


def prepare_model(framework: str, model: Any) -> Any:
    if framework == "tandem":
        from tandem.train.torch import prepare_model as prep
    else:
        from ray.train.torch import prepare_model as prep
    return prep(model)


# --------------------------------------------------------------------------------------
# fit_startup


def startup_loop(config: dict[str, Any]) -> None:
    """Report once. Rank 0 records when the function started (wall clock)."""
    t_start = time.time()
    train = train_api(config["framework"])
    if train.get_context().get_world_rank() == 0:
        write_json(config["out"], {"t_fn_start": t_start})
    train.report({"x": 1})


# --------------------------------------------------------------------------------------
# ddp_throughput


def ddp_loop(config: dict[str, Any]) -> None:
    """The DDP MLP loop of ``_ddp_plain.py``, with the system's ``prepare_model``."""
    import torch

    from benchmarks.cases._ddp_model import make_model, run_steps

    fw = config["framework"]
    train = train_api(fw)
    rank = train.get_context().get_world_rank()
    torch.set_num_threads(int(config.get("threads", 1)))  # the same on every side
    torch.manual_seed(0)
    model = prepare_model(fw, make_model())
    figures = run_steps(
        model,
        batch_size=config["batch_size"],
        warmup=config["warmup"],
        steps=config["steps"],
        rank=rank,
    )
    figures["torch_threads"] = torch.get_num_threads()
    if rank == 0:
        write_json(config["out"], figures)
    train.report(figures)


# --------------------------------------------------------------------------------------
# failure_recovery


def recovery_loop(config: dict[str, Any]) -> None:
    """Steps of ``step_s`` seconds; every ``every`` steps rank 0 saves a checkpoint and
    all ranks report. On the first attempt (no marker file yet) rank 1 records the time
    and SIGKILLs itself when it reaches ``kill_step``. On the restarted attempt rank 0
    records when its first step starts and which checkpoint step it resumed from."""
    fw = config["framework"]
    train = train_api(fw)
    rank = train.get_context().get_world_rank()
    marker = Path(config["marker"])
    resumed = Path(config["resumed"])

    start = 0
    ckpt = train.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d:
            start = json.loads((Path(d) / "state.json").read_text())["step"]

    for step in range(start + 1, config["total_steps"] + 1):
        if step == start + 1 and rank == 0 and marker.exists() and not resumed.exists():
            write_json(resumed, {"t_first_step": time.time(), "resumed_from": start})
        if rank == 1 and step == config["kill_step"] and not marker.exists():
            write_json(marker, {"t_kill": time.time()})
            os.kill(os.getpid(), 9)
        time.sleep(config["step_s"])
        if step % config["every"] == 0:
            if rank == 0:
                d = tempfile.mkdtemp(prefix=f"ckpt{step}-", dir=config["scratch"])
                Path(d, "state.json").write_text(json.dumps({"step": step}))
                train.report({"step": step}, checkpoint=train.Checkpoint.from_directory(d))
            else:
                train.report({"step": step})


# --------------------------------------------------------------------------------------
# report_latency


def latency_loop(config: dict[str, Any]) -> None:
    """Time ``calls`` consecutive ``train.report(metrics)`` calls (no checkpoint)."""
    import statistics

    train = train_api(config["framework"])
    rank = train.get_context().get_world_rank()
    samples = []
    clock = time.perf_counter_ns
    for i in range(config["calls"]):
        t0 = clock()
        train.report({"i": i, "loss": 0.5})
        samples.append(clock() - t0)
    if rank == 0:
        samples.sort()
        n = len(samples)
        write_json(
            config["out"],
            {
                "median_us": statistics.median(samples) / 1e3,
                "p90_us": samples[min(n - 1, int(n * 0.90))] / 1e3,
                "p99_us": samples[min(n - 1, int(n * 0.99))] / 1e3,
                "mean_us": sum(samples) / n / 1e3,
                "calls": n,
            },
        )
