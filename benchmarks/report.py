"""Render ``results.json`` (written by ``python -m benchmarks``) as Markdown and as a chart.

``render_markdown(results)`` gives the table for ``docs/benchmarks.md``: per figure, the
tandem median, each peer's median, the ratio tandem/peer, the target and whether tandem's
median meets it; with the date, the machine and the versions measured.
``python -m benchmarks.report docs/benchmarks/results.json`` prints it.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any


def _num(x: Any, unit: str = "") -> str:
    if x is None:
        return "—"
    if isinstance(x, bool):
        return "yes" if x else "no"
    ax = abs(x)
    if ax >= 1000:
        s = f"{x:,.0f}"
    elif ax >= 100:
        s = f"{x:.0f}"
    elif ax >= 10:
        s = f"{x:.1f}"
    elif ax >= 1:
        s = f"{x:.2f}"
    elif ax == 0:
        s = "0"
    else:
        s = f"{x:.3g}"
    return f"{s} {unit}".strip()


def _spread(summary: dict[str, Any] | None, unit: str) -> str:
    if not summary:
        return "—"
    if summary["n"] == 1:
        return _num(summary["median"], unit)
    return f"{_num(summary['median'], unit)} ({_num(summary['min'])}–{_num(summary['max'])})"


_EXC_LINE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)|AssertionError)\b")


def error_headline(error: str) -> str:
    """The most telling line of a recorded error: the last exception line of the
    traceback or log tail it carries, else its first line."""
    lines = [ln for ln in error.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        if _EXC_LINE.match(ln):
            return ln.strip()
    return lines[0].strip() if lines else "error"


def _met(m: bool | None) -> str:
    return "✅" if m else ("❌" if m is False else "—")


def render_markdown(results: dict[str, Any]) -> str:
    """The results as Markdown: a header (date, machine, versions) and one table.

    One row per (figure, peer); a figure without a peer measurement gets one row with
    "—" for the peer. Medians are followed by their min–max spread when there are
    several measurements. Variants that were skipped or failed are listed under the table.
    """
    meta = results.get("meta", {})
    machine = meta.get("machine", {})
    vers = meta.get("versions", {})
    lines = [
        f"Measured {meta.get('date', '?')}"
        + (" (smoke sizes: not a performance result)" if meta.get("smoke") else "")
        + f"; {meta.get('repeats', '?')} repeat(s) per variant, alternating systems; "
        "median (min–max).",
        "",
        f"Machine: {machine.get('cpu_count', '?')} CPUs"
        + (f" ({machine['cpu_model']})" if machine.get("cpu_model") else "")
        + f", {machine.get('memory_gb', '?')} GiB memory, {machine.get('platform', '?')}"
        + (
            f"; load average at start {', '.join(f'{x:.2f}' for x in machine['load_avg_at_start'])}"
            if machine.get("load_avg_at_start")
            else ""
        )
        + ".",
        "",
        "Versions: "
        + ", ".join(f"{k} {v if v else 'not installed'}" for k, v in vers.items())
        + ".",
        "",
        "| Case | Figure | tandem | Peer | Peer median | tandem/peer | Target | Met? |",
        "|---|---|---|---|---|---|---|---|",
    ]
    notes: list[str] = []
    for cname, case in results.get("cases", {}).items():
        variants = case.get("variants", {})
        t_summary = variants.get("tandem", {}).get("summary") or {}
        for row in case.get("comparisons", []):
            if row.get("tandem") is None and row.get("peer_value") is None:
                continue  # nobody measured it (e.g. a size only tandem runs, tandem failed)
            unit = row.get("unit", "")
            peer = row.get("peer")
            p_summary = (
                (variants.get(peer, {}).get("summary") or {}).get(row["figure"]) if peer else None
            )
            lines.append(
                "| "
                + " | ".join(
                    [
                        f"`{cname}`",
                        row["label"],
                        _spread(t_summary.get(row["figure"]), unit),
                        row.get("peer_label") or "—",
                        _spread(p_summary, unit) if peer else "—",
                        f"{row['ratio']:.3g}×" if row.get("ratio") is not None else "—",
                        row.get("target") or "—",
                        _met(row.get("met")) if row.get("target") else "",
                    ]
                )
                + " |"
            )
        for vname, v in variants.items():
            label = v.get("label", vname)
            if v.get("skipped") and v["skipped"] != "not selected (--systems)":
                notes.append(f"- `{cname}` / {label}: skipped ({v['skipped']}).")
            if v.get("errors"):
                notes.append(
                    f"- `{cname}` / {label}: failed: `{error_headline(v['errors'][0])[:160]}`."
                )
            if v.get("note") and v.get("runs"):
                notes.append(f"- `{cname}` / {label}: {v['note']}")
    if notes:
        lines += ["", "Notes:", *notes]
    return "\n".join(lines) + "\n"


def render_chart(results: dict[str, Any], path: str | Path) -> None:
    """One panel per case: its headline figure (the first) per variant, median bars with
    min–max error bars, and the target as a dashed line. Log scale when values span more
    than 20×."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cases = [(n, c) for n, c in results.get("cases", {}).items() if c.get("figures")]
    if not cases:
        return
    cols = 3
    rows = (len(cases) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 3.6 * rows), squeeze=False)
    palette = {"tandem": "#2b7bba", "ray": "#e8a33d", "optuna": "#7a5195", "torchrun": "#5a9e4b", "lightning": "#d45087"}
    for ax in axes.flat[len(cases) :]:
        ax.axis("off")
    for ax, (cname, case) in zip(axes.flat, cases):
        head = case["figures"][0]
        names, meds, lo, hi, colors = [], [], [], [], []
        for vname, v in case["variants"].items():
            s = (v.get("summary") or {}).get(head["key"])
            if not s:
                continue
            names.append(v.get("label", vname))
            meds.append(s["median"])
            lo.append(s["median"] - s["min"])
            hi.append(s["max"] - s["median"])
            colors.append(palette.get(v.get("system", ""), "#888888"))
        ax.set_title(f"{cname}: {head['label']}", fontsize=9)
        ax.set_ylabel(head["unit"] or "")
        if not meds:
            ax.text(0.5, 0.5, "no measurements", ha="center", va="center", transform=ax.transAxes)
            ax.set_xticks([])
            continue
        x = list(range(len(meds)))
        ax.bar(x, meds, color=colors, yerr=[lo, hi], capsize=3)
        ax.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
        positive = [m for m in meds if m > 0]
        if positive and max(positive) / min(positive) > 20:
            ax.set_yscale("log")
        tgt = head.get("target")
        if tgt:
            bound = tgt["value"]
            if tgt.get("relative_to"):
                ref = (case["variants"].get(tgt["relative_to"], {}).get("summary") or {}).get(
                    head["key"]
                )
                bound = tgt["value"] * ref["median"] if ref else None
            if bound:
                ax.axhline(bound, color="#c0392b", linestyle="--", linewidth=1)
                ax.text(
                    len(meds) - 0.5,
                    bound,
                    f" target {head.get('target_text', '')}",
                    color="#c0392b",
                    fontsize=7,
                    va="bottom",
                    ha="right",
                )
        for xi, m in zip(x, meds):
            ax.text(xi, m, _num(m), ha="center", va="bottom", fontsize=7)
    meta = results.get("meta", {})
    fig.suptitle(
        f"tandem vs peers — median, min–max over {meta.get('repeats', '?')} run(s)"
        + (" — SMOKE SIZES" if meta.get("smoke") else ""),
        fontsize=11,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    path = Path(argv[0] if argv else "docs/benchmarks/results.json")
    print(render_markdown(json.loads(path.read_text())), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
