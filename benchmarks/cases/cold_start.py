"""cold_start: a fresh process that runs one trivial trial, start to exit.

What it measures: ``python`` starts, imports the system, runs one tuning trial whose
function reports ``{"x": 1}`` once, and exits. ``process_s`` is timed from outside
(spawn to exit), ``import_s`` inside the process from the import to the built ``Tuner``
(study), ``fit_s`` around ``fit()``/``optimize()``, and ``peak_pss_mb`` is the PSS of the
whole process tree (Ray's GCS, raylet and workers included), sampled every 0.25 s.

Why: this is what every script, notebook cell and CI job pays before the first useful
result. Ray 2.60 takes 8.5 s quiet, up to 15 s loaded (``ray.init`` alone 2.4 s) and
0.82 GB; Optuna is the floor for "a tuning library" (no workers at all).

Target: ≤ 0.3 s start to exit (issue 25; issue 3 asked ≤ 1.5 s); ≤ 0.3 GB for a trivial
run. Where tandem's time goes: docs/benchmarks.md, "Cold start: where the time goes".
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.cases._common import (
    NO_WARM_HOST,
    Case,
    Figure,
    Target,
    baseline_variant,
    quiet_ray_env,
    subprocess_variant,
    warm_host_variant,
)


def _trivial(config: dict[str, Any]) -> None:
    from tandem import tune

    tune.report({"x": 1})


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from tandem import tune

    tuner = tune.Tuner(
        _trivial,
        param_space={},
        tune_config=tune.TuneConfig(num_samples=1),
        run_config=tune.RunConfig(name="cold_start", storage_path=workdir),
    )
    t1 = time.perf_counter()
    grid = tuner.fit()
    t2 = time.perf_counter()
    assert grid.num_errors == 0, grid.errors
    (result,) = list(grid)
    assert result.metrics["x"] == 1, result.metrics
    return {"import_s": t1 - t0, "fit_s": t2 - t1}


def _ray_trivial(config: dict[str, Any]) -> None:
    from ray import tune

    tune.report({"x": 1})


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    from ray import tune

    tuner = tune.Tuner(
        _ray_trivial,
        param_space={},
        tune_config=tune.TuneConfig(num_samples=1),
        run_config=tune.RunConfig(name="cold_start", storage_path=workdir),
    )
    t1 = time.perf_counter()
    grid = tuner.fit()
    t2 = time.perf_counter()
    assert grid.num_errors == 0, grid.errors
    (result,) = list(grid)
    assert result.metrics["x"] == 1, result.metrics
    return {"import_s": t1 - t0, "fit_s": t2 - t1}


def run_optuna(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    t0 = time.perf_counter()
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    t1 = time.perf_counter()
    study.optimize(lambda trial: 1.0, n_trials=1)
    t2 = time.perf_counter()
    assert len(study.trials) == 1
    return {"import_s": t1 - t0, "fit_s": t2 - t1}


_M = __name__
CASE = Case(
    name="cold_start",
    doc=__doc__ or "",
    figures=[
        Figure("process_s", "fresh process, one trivial trial", "s", "lower", Target("<=", 0.3)),
        Figure("import_s", "import to Tuner built", "s", "lower"),
        Figure("fit_s", "fit() call to return", "s", "lower"),
        Figure("peak_pss_mb", "peak PSS of the process tree", "MB", "lower", Target("<=", 300)),
    ],
    variants=[
        subprocess_variant("tandem", "tandem", "tandem", f"{_M}:run_tandem", sample_memory=True,
                           env=NO_WARM_HOST),
        warm_host_variant(f"{_M}:run_tandem", sample_memory=True),
        *baseline_variant(f"{_M}:run_tandem", sample_memory=True),
        subprocess_variant(
            "ray", "ray", "Ray Tune", f"{_M}:run_ray", env=quiet_ray_env(), sample_memory=True
        ),
        subprocess_variant("optuna", "optuna", "Optuna", f"{_M}:run_optuna", sample_memory=True),
    ],
    timeout_s=180,
    smoke_timeout_s=60,
)
