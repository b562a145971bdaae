"""report_latency: the cost of one ``train.report(metrics)`` call on the worker.

What it measures: one worker calls ``train.report({"i": i, "loss": 0.5})`` (no
checkpoint) 10,000 times in a row and times each call with ``perf_counter_ns``;
``median_us``, ``p99_us``. Ray Train V2 is measured with 5 calls only: its report puts
the result in a one-slot queue that the controller drains on its poll interval, so a
call can block for up to that interval.

Why: a training loop that reports every step must not be slowed down by it; with a
blocking report the training speed depends on the controller's polling.

Target (issue): ≤ 50 µs median.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from benchmarks.cases._common import (
    Case,
    Figure,
    Target,
    log,
    ray_train_env,
    read_json,
    subprocess_variant,
)


def _run(framework: str, calls: int, workdir: str) -> dict[str, Any]:
    from benchmarks.cases._loops import latency_loop
    from benchmarks.cases._trainers import fit_torch_trainer

    out = Path(workdir) / "latency.json"
    _, fit_s = fit_torch_trainer(
        framework,
        latency_loop,
        {"calls": calls, "out": str(out)},
        workers=1,
        storage_path=workdir,
        name="report_latency",
    )
    figures = read_json(out)
    figures["fit_s"] = fit_s
    log(f"median {figures['median_us']:.1f} us over {calls} calls")
    return figures


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("tandem", int(params["calls"]), workdir)


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("ray", int(params["ray_calls"]), workdir)


_M = __name__
CASE = Case(
    name="report_latency",
    doc=__doc__ or "",
    figures=[
        Figure(
            "median_us", "train.report() median, no checkpoint", "µs", "lower", Target("<=", 50)
        ),
        Figure("p99_us", "train.report() p99", "µs", "lower"),
    ],
    variants=[
        subprocess_variant(
            "tandem", "tandem", "tandem", f"{_M}:run_tandem", extra_requires=("torch",)
        ),
        subprocess_variant(
            "ray",
            "ray",
            "Ray Train V2",
            f"{_M}:run_ray",
            env=ray_train_env(),
            note="5 calls only (each may wait for the controller's poll).",
        ),
    ],
    params={"calls": 10_000, "ray_calls": 5},
    smoke_params={"calls": 500, "ray_calls": 3},
    timeout_s=300,
    smoke_timeout_s=60,
)
