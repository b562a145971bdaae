"""fit_startup: a 2-worker ``TorchTrainer.fit()`` that reports once.

What it measures: ``fit_s``, the time from the call to ``fit()`` to its return, inside
the process; ``fn_start_s``, from the call until rank 0's train function starts (the
worker processes, the gloo process group and the controller are up); ``process_s``, the
whole fresh process from spawn to exit; ``peak_pss_mb`` of the process tree.

Why: this fixed cost is paid by every training run and every Train-in-Tune trial. Ray
Train V2 (2.60) takes 17.3 s on a quiet machine, 10 s of it before the function starts.

Target (issue): ≤ 3 s call to return.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from benchmarks.cases._common import (
    NO_WARM_HOST,
    Case,
    Figure,
    Target,
    baseline_variant,
    log,
    ray_train_env,
    read_json,
    subprocess_variant,
    warm_host_variant,
)


def _run(framework: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    from benchmarks.cases._loops import startup_loop
    from benchmarks.cases._trainers import fit_torch_trainer

    out = Path(workdir) / "fn_start.json"
    t_call = time.time()
    _, fit_s = fit_torch_trainer(
        framework,
        startup_loop,
        {"out": str(out)},
        workers=int(params["workers"]),
        storage_path=workdir,
        name="fit_startup",
    )
    fn_start_s = read_json(out)["t_fn_start"] - t_call
    log(f"fit {fit_s:.2f} s, function started after {fn_start_s:.2f} s")
    return {"fit_s": fit_s, "fn_start_s": fn_start_s, "workers": int(params["workers"])}


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("tandem", params, workdir)


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("ray", params, workdir)


_M = __name__
CASE = Case(
    name="fit_startup",
    doc=__doc__ or "",
    figures=[
        Figure("fit_s", "2-worker fit(), call to return", "s", "lower", Target("<=", 3.0)),
        Figure("fn_start_s", "call until the train function starts", "s", "lower"),
        Figure("process_s", "whole fresh process", "s", "lower"),
        Figure("peak_pss_mb", "peak PSS of the process tree", "MB", "lower"),
    ],
    variants=[
        subprocess_variant(
            "tandem",
            "tandem",
            "tandem",
            f"{_M}:run_tandem",
            env=NO_WARM_HOST,
            sample_memory=True,
            extra_requires=("torch",),
        ),
        warm_host_variant(f"{_M}:run_tandem", preload=("torch",), sample_memory=True,
                          extra_requires=("torch",)),
        *baseline_variant(f"{_M}:run_tandem", sample_memory=True, extra_requires=("torch",)),
        subprocess_variant(
            "ray", "ray", "Ray Train V2", f"{_M}:run_ray", env=ray_train_env(), sample_memory=True
        ),
    ],
    params={"workers": 2},
    smoke_params={"workers": 2},
    timeout_s=300,
    smoke_timeout_s=60,
)
