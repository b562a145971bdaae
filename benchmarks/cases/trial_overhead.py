"""trial_overhead: how much longer a sweep of short trials takes than the trials themselves.

What it measures: N function trials that each sleep ``trial_s`` (100 ms), report once and
return, ``concurrency`` (2) at a time, run by one ``Tuner.fit()`` (Optuna: ``study.optimize(
n_jobs=2)``, threads; the sleep releases the GIL). The floor is ``N × trial_s /
concurrency``, the time the trials themselves need; ``overhead_pct`` = (wall time around
``fit()`` / floor − 1) × 100: starting and ending trials, reporting, the loggers' files,
the tuner's bookkeeping — everything that is not the trial. tandem and Optuna run 200
trials; Ray runs 20 by default (it needs about a second per trial; the figure is a ratio
to each variant's own floor, so the sizes compare; ``--trials`` sets all of them alike).

Why: most real sweeps are many trials of moderate length, two or a few at a time on one
machine; their wall time should be the trials', not the tuner's.

Target (issue 25): ≤ +2 % over the floor.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.cases._common import (
    Case,
    Figure,
    Target,
    baseline_variant,
    log,
    pickle_by_value,
    quiet_ray_env,
    subprocess_variant,
)


def _tandem_trial(config: dict[str, Any]) -> None:
    import time

    from tandem import tune

    time.sleep(config["trial_s"])
    tune.report({"x": 1})


def _ray_trial(config: dict[str, Any]) -> None:
    import time

    from ray import tune

    time.sleep(config["trial_s"])
    tune.report({"x": 1})


def _figures(n: int, trial_s: float, concurrency: int, fit_s: float, done: int) -> dict[str, Any]:
    floor_s = n * trial_s / concurrency
    log(f"{done}/{n} trials in {fit_s:.2f} s (floor {floor_s:.2f} s)")
    return {"overhead_pct": (fit_s / floor_s - 1) * 100, "fit_s": fit_s, "floor_s": floor_s,
            "trials": n, "completed": done}


def _run_tune(framework: str, params: dict[str, Any], workdir: str, n: int) -> dict[str, Any]:
    if framework == "tandem":
        from tandem import tune

        fn = _tandem_trial
    else:
        from ray import tune  # type: ignore[no-redef]

        fn = _ray_trial
    pickle_by_value(__name__)
    trial_s, conc = float(params["trial_s"]), int(params["concurrency"])
    tuner = tune.Tuner(
        fn,
        param_space={"trial_s": trial_s},
        tune_config=tune.TuneConfig(num_samples=n, max_concurrent_trials=conc),
        run_config=tune.RunConfig(name="trial_overhead", storage_path=workdir),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    fit_s = time.perf_counter() - t0
    done = sum(1 for r in grid if r.error is None and r.metrics.get("x") == 1)
    return _figures(n, trial_s, conc, fit_s, done)


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run_tune("tandem", params, workdir, int(params["trials"]))


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run_tune("ray", params, workdir, int(params["ray_trials"]))


def run_optuna(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    n, trial_s, conc = int(params["trials"]), float(params["trial_s"]), int(params["concurrency"])

    def objective(trial: Any) -> float:
        time.sleep(trial_s)
        trial.report(1.0, 1)
        return 1.0

    study = optuna.create_study()
    t0 = time.perf_counter()
    study.optimize(objective, n_trials=n, n_jobs=conc)
    fit_s = time.perf_counter() - t0
    return _figures(n, trial_s, conc, fit_s, len(study.trials))


_M = __name__
CASE = Case(
    name="trial_overhead",
    doc=__doc__ or "",
    figures=[
        Figure("overhead_pct", "wall time over the floor (N × 100 ms / 2)", "%", "lower",
               Target("<=", 2)),
        Figure("fit_s", "fit() wall time", "s", "info"),
        Figure("floor_s", "floor: the trials' own time", "s", "info"),
    ],
    variants=[
        subprocess_variant("tandem", "tandem", "tandem", f"{_M}:run_tandem"),
        *baseline_variant(f"{_M}:run_tandem"),
        subprocess_variant(
            "ray", "ray", "Ray Tune", f"{_M}:run_ray", env=quiet_ray_env(),
            note="runs `ray_trials` trials (see params), fewer than tandem; the figure is a "
                 "ratio to its own floor.",
        ),
        subprocess_variant("optuna", "optuna", "Optuna in-memory (n_jobs=2)",
                           f"{_M}:run_optuna"),
    ],
    params={"trials": 200, "ray_trials": 20, "trial_s": 0.1, "concurrency": 2},
    smoke_params={"trials": 4, "ray_trials": 2, "trial_s": 0.1, "concurrency": 2},
    timeout_s=600,
    smoke_timeout_s=60,
)
