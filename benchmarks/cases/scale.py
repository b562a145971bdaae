"""scale: driver memory and time per scheduling decision as the trial count grows.

What it measures: an ASHA experiment (max_t 3, grace 1, reduction factor 3) of N trials
over ``{x: uniform, y: uniform}``, each reporting up to 3 times instantly
(``_curves.py`` losses), for N = 100, 1,000 and 10,000 (tandem; Ray Tune at 100 only —
about a second per trial). Each N is a fresh process. Per N:

- ``rss_mb@N``: peak RSS of the driver process (``ru_maxrss``) — the controller's memory;
- ``decision_us@N``: mean time inside the scheduler's ``on_trial_result`` (the instance's
  method is wrapped with a timer), i.e. one ASHA decision;
- ``us_per_result@N``: ``fit()`` wall time / results reported — everything the
  controller does per result (bookkeeping, logging, launching the next trial);
- ``decision_growth`` and ``per_result_growth``: the largest N's value / the smallest's.

Why: large sweeps must not make the controller slower per decision or fat; Ray Tune's
release tests measure +14% over the floor for 10,000 trials on 16 CPUs.

Target (issue): ≤ 300 MB driver RSS at 10,000 trials, flat time per decision (read here
as growth ≤ 1.5× from 100 to 10,000 trials).
"""

from __future__ import annotations

import resource
import time
from typing import Any

from benchmarks.cases import _curves
from benchmarks.cases._common import Case, Figure, RunContext, Target, Variant, log, quiet_ray_env


def _tandem_trial(config: dict[str, Any]) -> None:
    from tandem import tune

    for t in range(1, config["reports"] + 1):
        tune.report({"loss": _curves.observed_loss(config, t, 0)})


def _ray_trial(config: dict[str, Any]) -> None:
    from ray import tune

    for t in range(1, config["reports"] + 1):
        tune.report({"loss": _curves.observed_loss(config, t, 0)})


class _Timer:
    """Wraps a bound method; accumulates call count and seconds. Picklable."""

    def __init__(self, method: Any) -> None:
        self.method = method
        self.calls = 0
        self.seconds = 0.0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return self.method(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.calls += 1


def _run(framework: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    if framework == "tandem":
        from tandem import tune
        from tandem.tune.schedulers import ASHAScheduler

        fn = _tandem_trial
    else:
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler

        fn = _ray_trial
    n, reports = int(params["n"]), int(params["reports"])
    scheduler = ASHAScheduler(max_t=reports, grace_period=1, reduction_factor=3)
    timer = _Timer(scheduler.on_trial_result)
    scheduler.on_trial_result = timer  # type: ignore[method-assign]
    tuner = tune.Tuner(
        fn,
        param_space={"x": tune.uniform(0, 1), "y": tune.uniform(0, 1), "reports": reports},
        tune_config=tune.TuneConfig(metric="loss", mode="min", num_samples=n, scheduler=scheduler),
        run_config=tune.RunConfig(name="scale", storage_path=workdir),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    fit_s = time.perf_counter() - t0
    results = 0
    for r in grid:
        df = r.metrics_dataframe
        results += len(df) if df is not None else 0
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    log(f"{n} trials, {results} results, {timer.calls} decisions in {fit_s:.1f} s, {rss_mb:.0f} MB")
    return {
        "rss_mb": rss_mb,
        "decision_us": timer.seconds / timer.calls * 1e6 if timer.calls else None,
        "decisions": timer.calls,
        "us_per_result": fit_s / results * 1e6 if results else None,
        "results": results,
        "fit_s": fit_s,
    }


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("tandem", params, workdir)


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _run("ray", params, workdir)


def _sized(
    name: str,
    system: str,
    label: str,
    target: str,
    sizes_key: str,
    env: dict[str, str] | None = None,
) -> Variant:
    def run(ctx: RunContext) -> dict[str, Any]:
        sizes = [int(s) for s in ctx.params[sizes_key]]
        out: dict[str, Any] = {}
        for n in sizes:
            figs = ctx.child(target, {**ctx.params, "n": n}, env=env)
            out.update({f"{k}@{n}": v for k, v in figs.items()})
        lo, hi = f"@{min(sizes)}", f"@{max(sizes)}"
        for key, growth in (
            ("decision_us", "decision_growth"),
            ("us_per_result", "per_result_growth"),
        ):
            a, b = out.get(key + lo), out.get(key + hi)
            if len(sizes) > 1 and a and b:
                out[growth] = b / a
        return out

    return Variant(name, system, label, run)


def _figures(params: dict[str, Any]) -> list[Figure]:
    sizes = sorted(int(s) for s in params["sizes"])
    big = sizes[-1]
    figs = [
        Figure(
            f"rss_mb@{big}", f"driver peak RSS, {big:,} trials", "MB", "lower", Target("<=", 300)
        )
    ]
    figs.append(
        Figure(
            "decision_growth",
            f"ASHA decision time growth {sizes[0]:,}→{big:,}",
            "×",
            "lower",
            Target("<=", 1.5),
        )
    )
    figs.append(
        Figure(
            "per_result_growth",
            f"controller time per result growth {sizes[0]:,}→{big:,}",
            "×",
            "lower",
        )
    )
    for n in sizes:
        figs.append(
            Figure(f"decision_us@{n}", f"µs per ASHA decision, {n:,} trials", "µs", "lower")
        )
        figs.append(
            Figure(f"us_per_result@{n}", f"controller µs per result, {n:,} trials", "µs", "lower")
        )
        if n != big:
            figs.append(Figure(f"rss_mb@{n}", f"driver peak RSS, {n:,} trials", "MB", "lower"))
    return figs


_M = __name__
CASE = Case(
    name="scale",
    doc=__doc__ or "",
    figures=[],
    figures_fn=_figures,
    variants=[
        _sized("tandem", "tandem", "tandem", f"{_M}:run_tandem", "sizes"),
        _sized("ray", "ray", "Ray Tune", f"{_M}:run_ray", "ray_sizes", env=quiet_ray_env()),
    ],
    params={"sizes": [100, 1000, 10_000], "ray_sizes": [100], "reports": 3},
    smoke_params={"sizes": [10, 50], "ray_sizes": [10], "reports": 3},
    timeout_s=900,
    smoke_timeout_s=60,
)
