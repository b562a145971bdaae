"""tandem on Ray vs Ray Train V2: call -> return of a 2-worker ``fit()`` that reports once.

Both trainers run in this one driver process, on the same, already-running Ray instance:
the script connects to ``--address`` (or ``$RAY_ADDRESS``), or else starts a local Ray
(``ray.init(num_cpus=...)``) before any timing. One untimed warm-up fit of each comes
first (imports, Ray's worker pool); then the timed fits alternate (tandem, Ray, tandem,
...) so that noise hits both alike. It prints a table of median / min / max seconds and
the ratio, and exits 1 if tandem is not at least ``--target`` times faster.

    python benchmarks/ray_fit_bench.py [--repeats 5] [--address auto] [--num-cpus 4]
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import sys
import tempfile
import time
from typing import Callable

os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")  # Ray Train V2 (the default in 2.60)


def tandem_train_fn(config):
    from tandem import train

    train.report({"loss": 1.0})


def ray_train_fn(config):
    import ray.train

    ray.train.report({"loss": 1.0})


def make_tandem_fit(storage: str) -> Callable[[], None]:
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    def fit() -> None:
        result = TorchTrainer(
            tandem_train_fn,
            scaling_config=ScalingConfig(num_workers=2),
            run_config=RunConfig(storage_path=storage, verbose=0),
        ).fit()
        assert result.metrics["loss"] == 1.0, result

    return fit


def make_ray_fit(storage: str) -> Callable[[], None]:
    import ray.train
    from ray.train.torch import TorchTrainer

    def fit() -> None:
        result = TorchTrainer(
            ray_train_fn,
            scaling_config=ray.train.ScalingConfig(num_workers=2),
            run_config=ray.train.RunConfig(storage_path=storage),
        ).fit()
        assert result.error is None, result  # V2 keeps metrics only with a checkpoint

    return fit


def timed(fn: Callable[[], None]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--address", default=os.environ.get("RAY_ADDRESS"),
                   help="a running Ray cluster; default: start a local one first")
    p.add_argument("--num-cpus", type=int, default=4, help="for the local Ray it starts")
    p.add_argument("--target", type=float, default=3.0)
    args = p.parse_args(argv)

    import ray

    t0 = time.perf_counter()
    if args.address:
        ray.init(address=args.address, log_to_driver=False, logging_level=logging.WARNING)
    else:
        ray.init(address="local", num_cpus=args.num_cpus, include_dashboard=False,
                 log_to_driver=False,
                 logging_level=logging.WARNING)
    ray_start_s = time.perf_counter() - t0

    import tandem

    tandem.init(cluster="ray")  # uses this process's Ray connection
    storage = tempfile.mkdtemp(prefix="ray-fit-bench-")
    fits = {"tandem (RayCluster)": make_tandem_fit(os.path.join(storage, "tandem")),
            "Ray Train V2": make_ray_fit(os.path.join(storage, "ray"))}
    warm = {name: timed(fn) for name, fn in fits.items()}
    times: dict[str, list[float]] = {name: [] for name in fits}
    for _ in range(args.repeats):
        for name, fn in fits.items():
            times[name].append(timed(fn))
    tandem.shutdown()
    ray.shutdown()

    nodes = "given cluster" if args.address else f"local Ray, {args.num_cpus} CPUs"
    print(f"\n2-worker TorchTrainer.fit() reporting once, call -> return ({nodes}; "
          f"Ray start {ray_start_s:.1f} s, not counted; {args.repeats} timed runs each)\n")
    print(f"{'system':<22}{'warm-up s':>11}{'median s':>11}{'min s':>9}{'max s':>9}")
    for name, ts in times.items():
        print(f"{name:<22}{warm[name]:>11.2f}{statistics.median(ts):>11.2f}{min(ts):>9.2f}"
              f"{max(ts):>9.2f}")
    t_med = statistics.median(times["tandem (RayCluster)"])
    r_med = statistics.median(times["Ray Train V2"])
    speedup = r_med / t_med
    verdict = "OK" if speedup >= args.target else "BELOW TARGET"
    print(f"\nspeed-up (Ray Train V2 median / tandem median): {speedup:.1f}x "
          f"(target >= {args.target:g}x): {verdict}")
    return 0 if speedup >= args.target else 1


if __name__ == "__main__":
    sys.exit(main())
