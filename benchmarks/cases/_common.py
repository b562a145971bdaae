"""What a benchmark case is made of: figures, targets, variants.

This module is imported by the harness *and* by every measurement subprocess, so it
uses the standard library only (a measurement of a cold start must not pay for numpy,
rich or matplotlib).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Package that each system needs; a variant whose package is missing is skipped.
SYSTEM_REQUIRES: dict[str, tuple[str, ...]] = {
    "tandem": ("tandem",),
    "ray": ("ray",),
    "optuna": ("optuna",),
    "torchrun": ("torch",),
    "lightning": ("lightning", "torch"),
}

Figures = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """A goal for tandem's median of one figure.

    Args:
        op: ``"<="``, ``">="`` or ``"=="``.
        value: the bound. With ``relative_to`` it is a factor of that variant's median.
        relative_to: name of a peer variant (``"torchrun"``) or None for an absolute bound.
    """

    op: str
    value: float
    relative_to: str | None = None

    def __post_init__(self) -> None:
        if self.op not in ("<=", ">=", "=="):
            raise ValueError(f"Target op must be '<=', '>=' or '==', got {self.op!r}")

    def describe(self, unit: str = "") -> str:
        sym = {"<=": "≤", ">=": "≥", "==": "="}[self.op]
        if self.relative_to:
            return f"{sym} {self.value:g}× {self.relative_to}"
        value = f"{self.value:,.0f}" if abs(self.value) >= 10_000 else f"{self.value:g}"
        sep = "" if unit in ("", "×") else " "
        return f"{sym} {value}{sep}{unit}"

    def met(self, value: float | None, reference: float | None = None) -> bool | None:
        """Whether ``value`` meets the target (None when it cannot be decided)."""
        if value is None:
            return None
        bound = self.value
        if self.relative_to:
            if reference is None:
                return None
            bound = self.value * reference
        if self.op == "<=":
            return value <= bound
        if self.op == ">=":
            return value >= bound
        return abs(value - bound) < 1e-9

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "value": self.value, "relative_to": self.relative_to}


@dataclass(frozen=True)
class Figure:
    """One number a case reports, e.g. ``Figure("process_s", "fresh process", "s")``.

    ``better`` is ``"lower"``, ``"higher"`` or ``"info"`` (no direction: a count, a step).
    """

    key: str
    label: str
    unit: str = ""
    better: str = "lower"
    target: Target | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "label": self.label,
            "unit": self.unit,
            "better": self.better,
            "target": self.target.to_json() if self.target else None,
            "target_text": self.target.describe(self.unit) if self.target else None,
        }


@dataclass
class RunContext:
    """What a variant gets for one measurement.

    Attributes:
        params: the case's parameters (smoke or full, after CLI overrides).
        workdir: a fresh, empty directory for this measurement (storage, marker files).
        repeat: index of this repeat (0-based); cases that vary a seed use it.
        timeout_s: wall-clock limit for the whole measurement.
        child: ``child(target, params=None, *, env=None, cmd=None, sample_memory=False,
            timeout_s=None) -> dict`` runs one fresh subprocess (see ``benchmarks._proc``).
    """

    params: dict[str, Any]
    workdir: Path
    repeat: int
    timeout_s: float
    child: Callable[..., Figures]


@dataclass(frozen=True)
class Variant:
    """One system's way of running a case.

    Args:
        name: unique within the case (``"ray_reuse"``).
        system: the software measured (``"tandem"``, ``"ray"``, ``"optuna"``, ``"torchrun"``);
            ``--systems`` filters on it.
        label: human-readable name for tables.
        run: ``run(ctx) -> figures``; runs ONE measurement in fresh subprocess(es).
        env: extra environment for the subprocess.
        note: a caveat shown next to the results (e.g. a smaller size than tandem's).
    """

    name: str
    system: str
    label: str
    run: Callable[[RunContext], Figures]
    note: str = ""
    extra_requires: tuple[str, ...] = ()

    @property
    def requires(self) -> tuple[str, ...]:
        return SYSTEM_REQUIRES.get(self.system, ()) + self.extra_requires


def subprocess_variant(
    name: str,
    system: str,
    label: str,
    target: str,
    *,
    env: Mapping[str, str] | None = None,
    sample_memory: bool = False,
    note: str = "",
    extra_requires: tuple[str, ...] = (),
) -> Variant:
    """A variant that runs ``module:function(params, workdir) -> figures`` in a fresh
    ``python`` process. The harness adds ``process_s`` (start to exit, seen from outside)
    and, with ``sample_memory``, ``peak_pss_mb`` of the whole process tree."""

    def run(ctx: RunContext) -> Figures:
        return ctx.child(target, env=dict(env or {}), sample_memory=sample_memory)

    return Variant(
        name=name, system=system, label=label, run=run, note=note, extra_requires=extra_requires
    )


#: No warm host (``tandem warm start``) for a plain tandem variant, even if one runs.
NO_WARM_HOST = {"TANDEM_WARM_HOST": "0"}
_warm_hosts: dict[tuple[str, ...], str] = {}  # preload -> the folder of its running host
_warmed: set[str] = set()  # targets run once through their host already


def _warm_host_dir(preload: tuple[str, ...]) -> str:
    """The folder of a warm host for the measurement subprocesses, started (with their
    environment, so with their key) on first use in this benchmark run, stopped at exit."""
    if preload in _warm_hosts:
        return _warm_hosts[preload]
    import atexit
    import subprocess
    import tempfile

    from benchmarks._proc import child_env

    folder = tempfile.mkdtemp(prefix="tandem-bench-warm-")
    env = child_env({"TANDEM_WARM_DIR": folder})
    cli = [sys.executable, "-m", "tandem.cli", "warm"]
    subprocess.run([*cli, "start", "--idle-timeout", "3600",
                    *[a for m in preload for a in ("--preload", m)]],
                   env=env, check=True, capture_output=True, timeout=600)
    atexit.register(subprocess.run, [*cli, "stop"], env=env, capture_output=True, timeout=120)
    _warm_hosts[preload] = folder
    return folder


def warm_host_variant(target: str, *, preload: tuple[str, ...] = (),
                      sample_memory: bool = False,
                      extra_requires: tuple[str, ...] = ()) -> Variant:
    """``tandem (warm host running)``: tandem's measurement in a fresh process while a warm
    host (``tandem warm start --preload ...``, docs/warm_workers.md) runs, one that served
    this program once before (a run that is not measured), as a host does after a day's
    first run. ``peak_pss_mb`` misses the host's processes (not in the program's tree)."""

    def run(ctx: RunContext) -> Figures:
        env = {"TANDEM_WARM_DIR": _warm_host_dir(preload)}
        if target not in _warmed:
            _warmed.add(target)
            ctx.child(target, env=env)  # what it learns from a first program: not measured
        return ctx.child(target, env=env, sample_memory=sample_memory)

    return Variant(name="tandem_warm_host", system="tandem",
                   label="tandem (warm host running)", run=run,
                   note="peak PSS without the host's processes", extra_requires=extra_requires)


BASELINE_ENV = "TANDEM_BENCH_BASELINE"


def baseline_variant(target: str, *, sample_memory: bool = False,
                     extra_requires: tuple[str, ...] = (), name: str = "tandem_baseline",
                     what: str = "") -> list[Variant]:
    """``tandem (baseline)``: tandem's own measurement run again with the tandem source of
    another revision, ``$TANDEM_BENCH_BASELINE/src`` (e.g. ``git worktree add /tmp/base
    main``), interleaved with ours repeat by repeat, so a before/after comparison shares one
    run and one machine load. No variant when the variable is unset."""
    root = os.environ.get(BASELINE_ENV)
    if not root:
        return []
    src = Path(root) / "src"
    if not (src / "tandem").is_dir():
        raise SystemExit(f"{BASELINE_ENV}={root!r} has no src/tandem; point it at a checkout "
                         f"of the revision to compare with (git worktree add DIR main).")
    repo = Path(__file__).resolve().parents[2]
    env = {"PYTHONPATH": os.pathsep.join([str(repo), str(src)])}
    label = f"tandem (baseline {Path(root).name}{', ' + what if what else ''})"
    return [subprocess_variant(name, "tandem", label,
                               target, env=env, sample_memory=sample_memory,
                               extra_requires=extra_requires)]


@dataclass
class Case:
    """A benchmark: what it measures, its figures and targets, and its variants.

    ``figures_for(params)`` lists the figures to summarise; the first one is the
    headline drawn in the chart. ``params`` are the full sizes, ``smoke_params``
    tiny ones (a few seconds per variant).
    """

    name: str
    doc: str
    figures: list[Figure]
    variants: list[Variant]
    params: dict[str, Any] = field(default_factory=dict)
    smoke_params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 600.0
    smoke_timeout_s: float = 60.0
    figures_fn: Callable[[dict[str, Any]], list[Figure]] | None = None

    def figures_for(self, params: dict[str, Any]) -> list[Figure]:
        return self.figures_fn(params) if self.figures_fn else list(self.figures)

    def resolve_params(
        self, *, smoke: bool, trials: int | None = None, workers: int | None = None
    ) -> dict[str, Any]:
        """Parameters for this run: ``--trials`` sets every ``trials``/``*_trials`` key,
        ``--workers`` every ``workers`` key."""
        params = dict(self.smoke_params if smoke else self.params)
        for key in list(params):
            if trials is not None and (key == "trials" or key.endswith("_trials")):
                params[key] = trials
            if workers is not None and key == "workers":
                params[key] = workers
        return params


# --------------------------------------------------------------------------------------
# Helpers used inside measurement subprocesses.


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` atomically (tmp file + rename), so a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(obj))
    os.replace(tmp, path)


def read_json(path: str | os.PathLike[str]) -> Any:
    return json.loads(Path(path).read_text())


def quiet_ray_env() -> dict[str, str]:
    """Environment for Ray peers: Ray's defaults, except no usage-stats prompt, and
    ``RAY_ADDRESS=local``: always start a fresh local Ray instance (as a plain
    ``ray.init()`` does on a machine without one) instead of attaching to a cluster
    that someone else started with ``ray start`` on this shared machine."""
    return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ADDRESS": "local"}


def ray_train_env() -> dict[str, str]:
    return {**quiet_ray_env(), "RAY_TRAIN_V2_ENABLED": "1"}


def log(msg: str) -> None:
    """Progress line from a measurement subprocess (goes to its log file)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)


def pickle_by_value(module_name: str) -> None:
    """Pickle a benchmark module's trial functions by value, as a function defined in the
    user's script travels; otherwise every fresh worker re-imports the benchmark module.
    tandem and Ray both pickle with cloudpickle, so both get the same treatment."""
    import sys

    import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[module_name])
