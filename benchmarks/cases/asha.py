"""asha: ASHA on synthetic learning curves — quality found, compute spent, wall time.

What it measures: 81 configurations ``{x, y}`` drawn from a seeded RNG (the same 81 for
every system: a grid over the list for tandem and Ray, ``enqueue_trial`` for Optuna),
each a learning curve ``loss_t = a·exp(-b·t) + c`` plus seeded noise (``_curves.py``;
fast-converging configs plateau higher, so early stopping can be fooled), one 10 ms step
per reported iteration, up to ``max_t`` 27. ASHA with grace 1 and reduction factor 3
(tandem and Ray ``ASHAScheduler``; Optuna ``SuccessiveHalvingPruner(min_resource=1,
reduction_factor=3)`` with ``n_jobs=2``, as the others run 2 trials at once on 2 CPUs).
Figures: ``wall_s`` (fit), ``total_steps`` (compute), ``best_loss`` (best final loss of a
trial that reached max_t), ``regret`` (true, noise-free loss of that config minus the
best of the 81), ``overhead_x`` (wall time / the floor ``total_steps × 10 ms / 2``).
Each repeat uses the next seed.

Why: a scheduler is only useful if it finds as good a config for the same compute, and
its wall time should be bound by the steps, not by trial overhead. Ray Tune 2.60 needs
≈ 100–300 s per run here (shared machine), against a floor of a few seconds.

Both ASHAs are asynchronous: which trial is judged against which rung scores depends on
the order results arrive in, so one seed's picks vary from run to run on either system.
Quality is compared over many seeds with ``python -m benchmarks.asha_seeds`` (paired per
seed; ``--replay`` feeds each run's results, in arrival order, to both schedulers to show
the decisions are the same on the same order). ``params["trace"]`` adds every trial's
rows with their report times to the figures.

Target (issue): the same decisions (best loss, regret, steps comparable to Ray's), wall
time bound by the steps.
"""

from __future__ import annotations

import time
from typing import Any

from benchmarks.cases import _curves
from benchmarks.cases._common import Case, Figure, RunContext, Variant, log, quiet_ray_env

CONCURRENCY = 2


def _tandem_curve(config: dict[str, Any]) -> None:
    from tandem import tune

    cfg = config["cfg"]
    for t in range(1, config["max_t"] + 1):
        time.sleep(config["step_s"])
        tune.report(
            {"loss": _curves.observed_loss(cfg, t, config["seed"]), "t": t, "wall": time.time()}
        )


def _ray_curve(config: dict[str, Any]) -> None:
    from ray import tune

    cfg = config["cfg"]
    for t in range(1, config["max_t"] + 1):
        time.sleep(config["step_s"])
        tune.report(
            {"loss": _curves.observed_loss(cfg, t, config["seed"]), "t": t, "wall": time.time()}
        )


def _tuner_run(framework: str, params: dict[str, Any], workdir: str) -> dict[str, Any]:
    if framework == "tandem":
        from tandem import tune
        from tandem.tune.schedulers import ASHAScheduler

        fn = _tandem_curve
    else:
        from ray import tune
        from ray.tune.schedulers import ASHAScheduler

        fn = _ray_curve
    seed, max_t = int(params["seed"]), int(params["max_t"])
    cfgs = _curves.configs(seed, int(params["trials"]))
    tuner = tune.Tuner(
        fn,
        param_space={
            "cfg": tune.grid_search(cfgs),
            "seed": seed,
            "max_t": max_t,
            "step_s": float(params["step_s"]),
        },
        tune_config=tune.TuneConfig(
            metric="loss",
            mode="min",
            scheduler=ASHAScheduler(
                max_t=max_t, grace_period=int(params["grace"]), reduction_factor=params["rf"]
            ),
        ),
        run_config=tune.RunConfig(name="asha", storage_path=workdir),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    wall_s = time.perf_counter() - t0
    finals = []
    trace: list[dict[str, Any]] = []
    for r in grid:
        if r.error is not None:
            raise RuntimeError(f"trial failed: {r.error}")
        finals.append((r.config["cfg"], int(r.metrics["t"]), float(r.metrics["loss"])))
        if params.get("trace"):
            df = r.metrics_dataframe
            trace.append(
                {
                    "cfg": r.config["cfg"],
                    "rows": [[int(t), float(w)] for t, w in zip(df["t"], df["wall"])],
                }
            )
    figures = _figures(finals, cfgs, params, wall_s)
    if params.get("trace"):
        figures["trace"] = trace
    return figures


def run_tandem(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _tuner_run("tandem", params, workdir)


def run_ray(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return _tuner_run("ray", params, workdir)


def run_optuna(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    seed, max_t, step_s = int(params["seed"]), int(params["max_t"]), float(params["step_s"])
    cfgs = _curves.configs(seed, int(params["trials"]))
    study = optuna.create_study(
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=seed),
        pruner=optuna.pruners.SuccessiveHalvingPruner(
            min_resource=int(params["grace"]),
            reduction_factor=int(params["rf"]),
            min_early_stopping_rate=0,
        ),
    )
    for cfg in cfgs:
        study.enqueue_trial(cfg)

    def objective(trial: optuna.Trial) -> float:
        cfg = {"x": trial.suggest_float("x", 0.0, 1.0), "y": trial.suggest_float("y", 0.0, 1.0)}
        loss = float("nan")
        for t in range(1, max_t + 1):
            time.sleep(step_s)
            loss = _curves.observed_loss(cfg, t, seed)
            trial.report(loss, t)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return loss

    t0 = time.perf_counter()
    study.optimize(objective, n_trials=len(cfgs), n_jobs=CONCURRENCY)
    wall_s = time.perf_counter() - t0
    finals = []
    for tr in study.trials:
        steps = sorted(tr.intermediate_values)
        if steps:
            finals.append(
                (
                    {"x": tr.params["x"], "y": tr.params["y"]},
                    steps[-1],
                    tr.intermediate_values[steps[-1]],
                )
            )
    return _figures(finals, cfgs, params, wall_s)


def _figures(
    finals: list[tuple[dict[str, float], int, float]],
    cfgs: list[dict[str, float]],
    params: dict[str, Any],
    wall_s: float,
) -> dict[str, Any]:
    """finals: per trial (config, last step reached, last reported loss)."""
    max_t = int(params["max_t"])
    total_steps = sum(t for _, t, _ in finals)
    full = [f for f in finals if f[1] >= max_t] or finals
    best_cfg, _, best_loss = min(full, key=lambda f: f[2])
    optimum = min(_curves.true_loss(c, max_t) for c in cfgs)
    floor_s = total_steps * float(params["step_s"]) / CONCURRENCY
    log(f"best {best_loss:.4f}, {total_steps} steps, {wall_s:.1f} s (floor {floor_s:.1f} s)")
    return {
        "wall_s": wall_s,
        "total_steps": total_steps,
        "best_loss": best_loss,
        "regret": _curves.true_loss(best_cfg, max_t) - optimum,
        "trials_at_max_t": sum(1 for f in finals if f[1] >= max_t),
        "overhead_x": wall_s / floor_s if floor_s else None,
        "seed": int(params["seed"]),
    }


def _seeded(
    name: str, system: str, label: str, target: str, env: dict[str, str] | None = None
) -> Variant:
    def run(ctx: RunContext) -> dict[str, Any]:
        params = {**ctx.params, "seed": int(ctx.params["seed0"]) + ctx.repeat}
        return ctx.child(target, params, env=env)

    return Variant(name, system, label, run)


_M = __name__
CASE = Case(
    name="asha",
    doc=__doc__ or "",
    figures=[
        Figure("wall_s", "ASHA wall time", "s", "lower"),
        Figure("best_loss", "best final loss found", "", "lower"),
        Figure("regret", "true loss of pick − best possible", "", "lower"),
        Figure("total_steps", "steps run (compute budget)", "steps", "info"),
        Figure("overhead_x", "wall time / step-bound floor", "×", "lower"),
    ],
    variants=[
        _seeded("tandem", "tandem", "tandem", f"{_M}:run_tandem"),
        _seeded("ray", "ray", "Ray Tune ASHA", f"{_M}:run_ray", env=quiet_ray_env()),
        _seeded("optuna", "optuna", "Optuna SuccessiveHalving", f"{_M}:run_optuna"),
    ],
    params={"trials": 81, "max_t": 27, "grace": 1, "rf": 3, "step_s": 0.01, "seed0": 0},
    smoke_params={"trials": 9, "max_t": 9, "grace": 1, "rf": 3, "step_s": 0.001, "seed0": 0},
    timeout_s=600,
    smoke_timeout_s=60,
)
