"""The benchmark harness: ``python -m benchmarks [--only NAME ...] [--repeats N] ...``.

For each case it runs every variant once per repeat, alternating systems (tandem, peer,
tandem, peer, ...) so that a noisy neighbour hits all of them alike. Each measurement is a
fresh subprocess. It then reports, per figure and variant, the median and the spread
(min–max), the ratio tandem/peer and the target; and writes ``results.json`` and
``chart.png`` into ``--out``.

A variant whose package is missing is skipped with a note. A variant that fails is
recorded with its error (and its log tail) and not repeated; the harness itself does not
fail because a measurement did.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import importlib.metadata
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from benchmarks._proc import ROOT, MeasurementError, run_child
from benchmarks.cases import CASE_NAMES, load_case
from benchmarks.cases._common import Case, RunContext, Variant
from benchmarks.report import error_headline

SYSTEMS = ("tandem", "ray", "optuna", "torchrun", "lightning")


# --------------------------------------------------------------------------------------
# Environment facts


def _version(dist: str, module: str | None = None) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        pass
    if module and importlib.util.find_spec(module) is not None:
        try:
            return str(getattr(importlib.import_module(module), "__version__", "unknown"))
        except Exception as exc:  # noqa: BLE001 - a half-written package must not stop the harness
            return f"unimportable ({type(exc).__name__})"
    return None


def machine_info() -> dict[str, Any]:
    import psutil

    cpu_model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": cpu_model,
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "load_avg_at_start": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "tandem": _version("tandem-ml", "tandem"),
        "torch": _version("torch"),
        "ray": _version("ray"),
        "optuna": _version("optuna"),
    }


def _available(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# --------------------------------------------------------------------------------------
# Statistics


def summarize(values: list[Any]) -> dict[str, Any] | None:
    nums = [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if not nums:
        return None
    return {
        "median": statistics.median(nums),
        "min": min(nums),
        "max": max(nums),
        "n": len(nums),
        "values": nums,
    }


def compare(case: Case, params: dict[str, Any], variants: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (figure, peer variant): tandem's median against the peer's."""
    rows: list[dict[str, Any]] = []
    tandem = variants.get("tandem", {})
    t_sum = tandem.get("summary", {})
    for fig in case.figures_for(params):
        t_med = (t_sum.get(fig.key) or {}).get("median")
        ref = None
        if fig.target and fig.target.relative_to:
            ref = (
                (variants.get(fig.target.relative_to, {}).get("summary") or {}).get(fig.key) or {}
            ).get("median")
        met = fig.target.met(t_med, ref) if fig.target else None
        peers = [
            (name, v)
            for name, v in variants.items()
            if name != "tandem" and (v.get("summary") or {}).get(fig.key)
        ]
        base = {
            "figure": fig.key,
            "label": fig.label,
            "unit": fig.unit,
            "better": fig.better,
            "tandem": t_med,
            "target": fig.target.describe(fig.unit) if fig.target else None,
            "met": met,
        }
        if not peers:
            rows.append(
                {**base, "peer": None, "peer_label": None, "peer_value": None, "ratio": None}
            )
        for name, v in peers:
            p_med = v["summary"][fig.key]["median"]
            ratio = (
                t_med / p_med if (t_med is not None and p_med and fig.better != "info") else None
            )
            rows.append(
                {
                    **base,
                    "peer": name,
                    "peer_label": v["label"],
                    "peer_value": p_med,
                    "ratio": ratio,
                }
            )
    return rows


# --------------------------------------------------------------------------------------
# Running


def _fmt(x: Any, unit: str = "") -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, (int, float)):
        ax = abs(x)
        if ax >= 1000:
            s = f"{x:,.0f}"
        elif ax >= 100:
            s = f"{x:.0f}"
        elif ax >= 10:
            s = f"{x:.1f}"
        elif ax >= 1:
            s = f"{x:.2f}"
        else:
            s = f"{x:.3g}"
        return f"{s} {unit}".strip()
    return str(x)


class Harness:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.systems = set(args.systems) if args.systems else set(SYSTEMS)
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.log_dir = Path(args.logs or Path(tempfile.gettempdir()) / f"tandem-bench-{stamp}")
        self.scratch = Path(tempfile.mkdtemp(prefix="tandem-bench-work-"))

    def echo(self, msg: str) -> None:
        print(msg, flush=True)

    def run_case(self, case: Case) -> dict[str, Any]:
        args = self.args
        params = case.resolve_params(smoke=args.smoke, trials=args.trials, workers=args.workers)
        for key, value in args.overrides:
            if key in params:
                params[key] = value
        timeout = case.smoke_timeout_s if args.smoke else case.timeout_s
        out: dict[str, Any] = {
            "doc": case.doc.strip(),
            "params": params,
            "figures": [f.to_json() for f in case.figures_for(params)],
            "variants": {},
        }
        active: list[Variant] = []
        for v in case.variants:
            entry: dict[str, Any] = {"system": v.system, "label": v.label, "note": v.note}
            out["variants"][v.name] = entry
            if v.system not in self.systems:
                entry["skipped"] = "not selected (--systems)"
                continue
            missing = [m for m in v.requires if not _available(m)]
            if missing:
                entry["skipped"] = f"{', '.join(missing)} not installed"
                self.echo(f"  skip {case.name}/{v.name}: {entry['skipped']}")
                continue
            entry.update(runs=[], errors=[])
            active.append(v)

        for rep in range(args.repeats):
            for v in active:
                entry = out["variants"][v.name]
                if entry["errors"]:
                    continue  # failed once: do not burn time repeating it
                figures = self.measure(case, v, params, rep, timeout)
                if isinstance(figures, str):
                    entry["errors"].append(figures)
                    self.echo(f"  {case.name}/{v.name} #{rep}: ERROR {error_headline(figures)}")
                else:
                    entry["runs"].append(figures)
                    shown = ", ".join(
                        f"{f.key}={_fmt(figures.get(f.key), f.unit)}"
                        for f in case.figures_for(params)
                        if f.key in figures
                    )
                    self.echo(f"  {case.name}/{v.name} #{rep}: {shown}")

        for v in active:
            entry = out["variants"][v.name]
            keys = sorted({k for r in entry["runs"] for k in r})
            entry["summary"] = {
                k: s for k in keys if (s := summarize([r.get(k) for r in entry["runs"]]))
            }
        out["comparisons"] = compare(case, params, out["variants"])
        return out

    def measure(
        self, case: Case, v: Variant, params: dict[str, Any], rep: int, timeout: float
    ) -> dict[str, Any] | str:
        workdir = self.scratch / f"{case.name}-{v.name}-{rep}"
        workdir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / case.name / f"{v.name}-{rep}.log"
        deadline = time.monotonic() + timeout

        def child(
            target: str | None,
            child_params: dict[str, Any] | None = None,
            *,
            env: dict[str, str] | None = None,
            cmd: list[str] | None = None,
            sample_memory: bool = False,
            timeout_s: float | None = None,
        ) -> dict[str, Any]:
            left = max(1.0, deadline - time.monotonic())
            return run_child(
                target,
                params if child_params is None else child_params,
                workdir=workdir,
                log_path=log_path,
                timeout_s=min(timeout_s or left, left),
                env=env,
                cmd=cmd,
                sample_memory=sample_memory,
            )

        ctx = RunContext(params=params, workdir=workdir, repeat=rep, timeout_s=timeout, child=child)
        try:
            return v.run(ctx)
        except MeasurementError as exc:
            return f"{exc}\n(log: {log_path})"
        except Exception:  # noqa: BLE001 - recorded as this variant's error
            return f"{traceback.format_exc()}\n(log: {log_path})"
        # the folder stays until the run ends (``self.scratch`` goes then): deleting the
        # thousands of files of one measurement (1,000 trials: ~5,000) slowed the file
        # creation of the next for seconds on this machine's disk (ext4 mounted with
        # ``discard``), which made every measurement after the first 3-4x slower

    def run(self) -> dict[str, Any]:
        args = self.args
        names = args.only or list(CASE_NAMES)
        unknown = [n for n in names if n not in CASE_NAMES]
        if unknown:
            raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(CASE_NAMES)}")
        results: dict[str, Any] = {
            "meta": {
                "date": _dt.datetime.now().astimezone().isoformat(timespec="seconds"),
                "machine": machine_info(),
                "versions": versions(),
                "smoke": args.smoke,
                "repeats": args.repeats,
                "systems": sorted(self.systems),
                "argv": sys.argv[1:],
                "logs": str(self.log_dir),
            },
            "cases": {},
        }
        t0 = time.perf_counter()
        try:
            for name in names:
                case = load_case(name)
                self.echo(f"[{name}]")
                tc = time.perf_counter()
                results["cases"][name] = self.run_case(case)
                results["cases"][name]["elapsed_s"] = time.perf_counter() - tc
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
        results["meta"]["elapsed_s"] = time.perf_counter() - t0
        return results


# --------------------------------------------------------------------------------------
# Output


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="tandem vs peers (median, min–max)", show_lines=False)
    for col in (
        "case",
        "figure",
        "system",
        "median",
        "min–max",
        "n",
        "tandem/this",
        "target",
        "met",
    ):
        table.add_column(col, justify="right" if col in ("median", "n", "tandem/this") else "left")
    for cname, case in results["cases"].items():
        first_row = True
        for fig in case["figures"]:
            t_med = (
                case["variants"].get("tandem", {}).get("summary", {}).get(fig["key"]) or {}
            ).get("median")
            first_of_fig = True
            for vname, v in case["variants"].items():
                s = (v.get("summary") or {}).get(fig["key"])
                if not s:
                    continue
                ratio = (
                    t_med / s["median"]
                    if (t_med is not None and s["median"] and vname != "tandem")
                    else None
                )
                met = ""
                if vname == "tandem" and fig["target"]:
                    row = next((r for r in case["comparisons"] if r["figure"] == fig["key"]), None)
                    m = row["met"] if row else None
                    met = "[green]yes[/]" if m else ("[red]no[/]" if m is False else "?")
                table.add_row(
                    cname if first_row else "",
                    fig["label"],
                    v["label"],
                    _fmt(s["median"], fig["unit"]),
                    f"{_fmt(s['min'])}–{_fmt(s['max'])}",
                    str(s["n"]),
                    f"{ratio:.3g}×" if ratio is not None else "",
                    (fig["target_text"] or "") if first_of_fig else "",
                    met,
                )
                first_row = first_of_fig = False
        for v in case["variants"].values():
            if v.get("skipped") and v["skipped"] != "not selected (--systems)":
                table.add_row(
                    cname if first_row else "",
                    "",
                    v["label"],
                    "skipped",
                    v["skipped"],
                    "",
                    "",
                    "",
                    "",
                )
                first_row = False
            elif v.get("errors"):
                msg = error_headline(v["errors"][0])
                table.add_row(
                    cname if first_row else "",
                    "",
                    v["label"],
                    "[red]error[/]",
                    msg[:90],
                    "",
                    "",
                    "",
                    "",
                )
                first_row = False
        table.add_section()
    Console(width=max(140, shutil.get_terminal_size().columns)).print(table)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Measure tandem against its peers (Ray Tune / Ray Train V2, Optuna, torchrun, Lightning).",
    )
    p.add_argument(
        "--only", nargs="+", metavar="NAME", help=f"cases to run ({', '.join(CASE_NAMES)})"
    )
    p.add_argument("--repeats", type=int, default=3, help="measurements per variant (default 3)")
    p.add_argument("--trials", type=int, help="override every trial count (all systems alike)")
    p.add_argument("--workers", type=int, help="override the worker count of the train cases")
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override one case parameter (JSON value), e.g. --set ray_trials=50; repeatable",
    )
    p.add_argument(
        "--smoke", action="store_true", help="tiny sizes; checks the harness runs, not speed"
    )
    p.add_argument(
        "--systems",
        type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
        help=f"comma-separated subset of {','.join(SYSTEMS)} (default: all installed)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="results.json and chart.png go here (default: docs/benchmarks, the published "
        "figures; with --smoke a fresh temp dir, so a smoke run never overwrites them)",
    )
    p.add_argument("--logs", type=Path, help="per-measurement logs (default: a fresh temp dir)")
    p.add_argument("--no-chart", action="store_true", help="skip chart.png")
    args = p.parse_args(argv)
    if args.systems:
        bad = [s for s in args.systems if s not in SYSTEMS]
        if bad:
            p.error(f"unknown system(s) {bad}; choose from {', '.join(SYSTEMS)}")
    parsed = []
    for item in args.overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            p.error(f"--set takes KEY=VALUE, got {item!r}")
        try:
            parsed.append((key, json.loads(raw)))
        except json.JSONDecodeError:
            parsed.append((key, raw))
    args.overrides = parsed
    if args.repeats < 1:
        p.error("--repeats must be at least 1")
    if args.out is None:
        args.out = (Path(tempfile.mkdtemp(prefix="tandem-bench-smoke-")) if args.smoke
                    else Path("docs/benchmarks"))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out_dir = args.out if args.out.is_absolute() else Path.cwd() / args.out
    os.chdir(ROOT)
    if str(ROOT / "src") not in sys.path:
        sys.path.append(str(ROOT / "src"))  # an uninstalled checkout (children get it too)
    harness = Harness(args)
    print(f"logs: {harness.log_dir}", flush=True)
    results = harness.run()
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(results, indent=1, default=str) + "\n")
    print_table(results)
    if not args.no_chart:
        from benchmarks.report import render_chart

        try:
            render_chart(results, out_dir / "chart.png")
        except Exception as exc:  # noqa: BLE001 - a chart must never lose the results
            print(f"chart not written: {exc!r}", file=sys.stderr)
    print(f"wrote {out_dir / 'results.json'} in {results['meta']['elapsed_s']:.0f} s", flush=True)
    return 0
