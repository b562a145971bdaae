"""result_throughput: how many reported results per second reach the driver.

What it measures: 4 concurrent trials each call ``report()`` as fast as they can —
10,000 times each for tandem, 2,000 for Ray (it manages a few hundred per second; the
figure is a rate) — with the default loggers on (result.json, progress.csv, ...).
``results_per_s`` = all reports / time around ``fit()``; the case checks every report
arrived (``metrics_dataframe`` has one row per report). Both systems declare 4 CPUs
(``init(num_cpus=4)``) so the 4 trials run at once on a 2-core machine.

Why: training loops that report every step, and many trials at once, must not be
throttled by the driver. Ray 2.60 delivers 400–470 results/s here (quiet machine); its
docs quote ~500/s without logging, 50–100 with.

Target (issue): ≥ 20,000 results/s.

The ``*_stopper`` variants add stop criteria that never fire: each result must then be
checked before the trial goes on, so tandem's workers wait for the driver's verdict at every
report (a stop at iteration k leaves exactly k rows, as in Ray). That is the cost of acting
where the decision was made; without a stopper or an adaptive scheduler reports do not wait.

The ``tandem_server_plateau`` variant stops with ``TrialPlateauStopper`` (never firing):
a stopper that decides a trial from its own results (``Stopper.trial_local``) runs a copy
next to the trial, in its worker, so again no report waits (before, every one did).

Since issue 25 a report waits only where a decision can happen: the tuner tells the trial
in advance which results its stopper or scheduler may act on (a dict criterion or
``MaximumIterationStopper``, FIFO, ASHA's rungs), so the never-firing criterion here asks
nothing and both ``*_stopper`` variants run at about the FIFO rate; a function stopper or a
custom scheduler still waits at every report.

The ``tandem_server*`` variants run the same Tuner against a train server (``tandem server
start`` on loopback, started before the clock), reporting ``server_reports`` times per
trial: results travel worker → server → the client's event stream, and with stop criteria
each verdict goes back client → server → worker over HTTP. Before the clock the case waits
until the server says its start-up imports are done (``/api/health``'s ``warm``): it
measures a running server's result path (``--set server_wait_warm=0``: a server just
started).
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
    quiet_ray_env,
    subprocess_variant,
)

CONCURRENT = 4


def _tandem_reporter(config: dict[str, Any]) -> None:
    from tandem import tune

    for i in range(config["reports"]):
        tune.report({"i": i, "loss": 1.0 / (i + 1)})


def run_tandem(params: dict[str, Any], workdir: str, stop: Any = None,
               init: bool = True) -> dict[str, Any]:
    import tandem
    from tandem import tune

    if init:
        tandem.init(num_cpus=CONCURRENT)
    reports = int(params["reports"])
    tuner = tune.Tuner(
        _tandem_reporter,
        param_space={"reports": reports},
        tune_config=tune.TuneConfig(num_samples=CONCURRENT, max_concurrent_trials=CONCURRENT),
        run_config=tune.RunConfig(name="result_throughput", storage_path=workdir, stop=stop),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    fit_s = time.perf_counter() - t0
    return _figures(grid, reports, fit_s)


# A stop criterion that never fires but is checked at every result: each report then waits
# for the driver's verdict (so a stop decided at iteration k leaves exactly k rows).
NEVER = {"training_iteration": 10**12}


def run_tandem_stopper(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return run_tandem(params, workdir, stop=NEVER)


def run_ray_stopper(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return run_ray(params, workdir, stop=NEVER)


def run_tandem_server(params: dict[str, Any], workdir: str, stop: Any = None) -> dict[str, Any]:
    import json
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    home = os.path.join(workdir, "home")
    os.makedirs(home, exist_ok=True)
    os.environ["HOME"] = home  # the server's address/token file goes here, for the client
    cli = [sys.executable, "-m", "tandem.cli", "server"]
    subprocess.run([*cli, "start", "--port", str(port), "--num-cpus", str(CONCURRENT),
                    "--usage-interval-s", "0"], check=True, capture_output=True, timeout=120)
    with open(os.path.join(home, ".tandem", "server.json")) as f:
        pid = int(json.load(f)["pid"])
    try:
        if int(params.get("server_wait_warm", 1)):
            _wait_warm(port)
        os.environ["TANDEM_ADDRESS"] = f"127.0.0.1:{port}"
        return run_tandem({**params, "reports": params["server_reports"]}, workdir,
                          stop=stop, init=False)
    finally:
        subprocess.run([*cli, "stop"], capture_output=True, timeout=60, check=False)
        _wait_gone(pid)


def run_tandem_server_stopper(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    return run_tandem_server(params, workdir, stop=NEVER)


def run_tandem_server_plateau(params: dict[str, Any], workdir: str) -> dict[str, Any]:
    from tandem.tune.stopper import TrialPlateauStopper

    # std=0 never fires (a std is never < 0) but is computed at every result; a stopper
    # that decides from the trial's own results runs next to it (Stopper.trial_local)
    return run_tandem_server(params, workdir, stop=TrialPlateauStopper("loss", std=0.0))


# Polls /api/health until the server says its warm-up is done ("warm", docs/server.md;
# a revision without the field counts as warm), in a process of its own: what it imports
# (urllib) must not make the client's imports inside fit() cheaper.
_WAIT_WARM = '''
import json, os, sys, time, urllib.request
port, deadline = sys.argv[1], time.monotonic() + 120
with open(os.path.expanduser("~/.tandem/server.json")) as f:
    token = json.load(f)["token"]
req = urllib.request.Request(f"http://127.0.0.1:{port}/api/health",
                             headers={"Authorization": f"Bearer {token}"})
while time.monotonic() < deadline:
    with urllib.request.urlopen(req, timeout=10) as r:
        if json.load(r).get("warm", True):
            break
    time.sleep(0.05)
'''


def _wait_warm(port: int) -> None:
    """Waits (at most 2 min) until the server has imported what its first job would: the
    case measures a running server's result path, not its start-up (a server serves many
    experiments; ``--set server_wait_warm=0`` measures a server just started)."""
    import subprocess
    import sys

    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _WAIT_WARM, str(port)], check=True, timeout=150)
    log(f"server warm {time.perf_counter() - t0:.2f} s after `tandem server start` returned")


def _wait_gone(pid: int, timeout_s: float = 30.0) -> None:
    import os

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, 9)  # never leave the server behind


def _ray_reporter(config: dict[str, Any]) -> None:
    from ray import tune

    for i in range(config["reports"]):
        tune.report({"i": i, "loss": 1.0 / (i + 1)})


def run_ray(params: dict[str, Any], workdir: str, stop: Any = None) -> dict[str, Any]:
    import ray
    from ray import tune

    ray.init(num_cpus=CONCURRENT)
    reports = int(params["ray_reports"])
    tuner = tune.Tuner(
        _ray_reporter,
        param_space={"reports": reports},
        tune_config=tune.TuneConfig(num_samples=CONCURRENT, max_concurrent_trials=CONCURRENT),
        run_config=tune.RunConfig(name="result_throughput", storage_path=workdir, stop=stop),
    )
    t0 = time.perf_counter()
    grid = tuner.fit()
    fit_s = time.perf_counter() - t0
    return _figures(grid, reports, fit_s)


def _figures(grid: Any, reports: int, fit_s: float) -> dict[str, Any]:
    total = CONCURRENT * reports
    rows = 0
    for r in grid:
        if r.error is not None:
            raise RuntimeError(f"trial failed: {r.error}")
        df = r.metrics_dataframe
        rows += len(df) if df is not None else 0
    log(f"{rows}/{total} results recorded in {fit_s:.2f} s")
    return {
        "results_per_s": total / fit_s,
        "fit_s": fit_s,
        "results": total,
        "results_recorded": rows,
    }


_M = __name__
CASE = Case(
    name="result_throughput",
    doc=__doc__ or "",
    figures=[
        Figure(
            "results_per_s",
            "results/s reaching the driver",
            "results/s",
            "higher",
            Target(">=", 20_000),
        ),
        Figure("fit_s", "fit() wall time", "s", "info"),
    ],
    variants=[
        subprocess_variant("tandem", "tandem", "tandem", f"{_M}:run_tandem"),
        subprocess_variant(
            "ray",
            "ray",
            "Ray Tune",
            f"{_M}:run_ray",
            env=quiet_ray_env(),
            note="reports `ray_reports` times per trial instead of `reports`; the figure is a rate.",
        ),
        subprocess_variant(
            "tandem_stopper", "tandem", "tandem, stop criteria", f"{_M}:run_tandem_stopper",
            note="RunConfig(stop={'training_iteration': 10**12}): every report waits for the "
                 "driver's verdict, so decisions take effect at the result that made them.",
        ),
        subprocess_variant(
            "tandem_server", "tandem", "tandem on a train server", f"{_M}:run_tandem_server",
            note="the Tuner runs on the client; trials on a loopback train server.",
        ),
        subprocess_variant(
            "tandem_server_stopper", "tandem", "tandem on a train server, stop criteria",
            f"{_M}:run_tandem_server_stopper",
            note="every report waits for the verdict, sent back by the client over HTTP.",
        ),
        # before/after of the verdict path (issue 25): the server-with-stop-criteria run of
        # another revision ($TANDEM_BENCH_BASELINE), interleaved with ours
        *baseline_variant(f"{_M}:run_tandem_server_stopper"),
        subprocess_variant(
            "tandem_server_plateau", "tandem", "tandem on a train server, TrialPlateauStopper",
            f"{_M}:run_tandem_server_plateau",
            note="a stopper that decides from the trial's own results (never fires here): "
                 "its copy runs in the trial's worker, so no report waits for a verdict.",
        ),
        *baseline_variant(f"{_M}:run_tandem_server_plateau", name="tandem_baseline_plateau",
                          what="TrialPlateauStopper"),
        subprocess_variant(
            "ray_stopper", "ray", "Ray Tune, stop criteria", f"{_M}:run_ray_stopper",
            env=quiet_ray_env(),
            note="the same stop criteria on Ray; reports `ray_reports` times per trial.",
        ),
    ],
    params={"reports": 10_000, "ray_reports": 2_000, "server_reports": 2_000,
            "server_wait_warm": 1},
    smoke_params={"reports": 200, "ray_reports": 50, "server_reports": 50,
                  "server_wait_warm": 1},
    timeout_s=600,
    smoke_timeout_s=60,
)
