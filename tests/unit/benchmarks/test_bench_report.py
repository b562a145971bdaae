"""Harness bookkeeping that needs no subprocess: summaries, comparisons, Markdown."""

from __future__ import annotations

from pathlib import Path

from benchmarks.cases import CASE_NAMES, load_case
from benchmarks.cases._common import Case, Figure, Target, Variant
from benchmarks.report import error_headline, render_chart, render_markdown
from benchmarks.run import compare, summarize


def _noop(ctx):  # pragma: no cover - never run
    return {}


def _case() -> Case:
    return Case(
        name="demo",
        doc="demo",
        figures=[
            Figure("s", "seconds", "s", "lower", Target("<=", 1.5)),
            Figure("rate", "rate", "/s", "higher", Target(">=", 0.98, "plain")),
        ],
        variants=[
            Variant("tandem", "tandem", "tandem", _noop),
            Variant("plain", "torchrun", "plain", _noop),
        ],
    )


def _results() -> dict:
    case = _case()
    variants = {
        "tandem": {
            "system": "tandem",
            "label": "tandem",
            "summary": {"s": summarize([1.0, 2.0, 1.2]), "rate": summarize([99.0])},
        },
        "plain": {
            "system": "torchrun",
            "label": "plain",
            "summary": {"s": summarize([3.0]), "rate": summarize([100.0])},
        },
        "ray": {"system": "ray", "label": "Ray", "skipped": "ray not installed"},
    }
    return {
        "meta": {
            "date": "2026-01-01",
            "repeats": 3,
            "machine": {"cpu_count": 2, "memory_gb": 24},
            "versions": {"python": "3.11", "ray": None},
        },
        "cases": {
            "demo": {
                "figures": [f.to_json() for f in case.figures],
                "variants": variants,
                "comparisons": compare(case, {}, variants),
            }
        },
    }


def test_summarize_takes_median_and_spread_of_numbers_only() -> None:
    s = summarize([3.0, 1.0, 2.0, None, "x"])
    assert (s["median"], s["min"], s["max"], s["n"]) == (2.0, 1.0, 3.0, 3)
    assert summarize([None]) is None


def test_compare_gives_ratio_and_relative_target() -> None:
    rows = _results()["cases"]["demo"]["comparisons"]
    by_fig = {r["figure"]: r for r in rows}
    assert by_fig["s"]["ratio"] == 1.2 / 3.0 and by_fig["s"]["met"] is True
    assert by_fig["rate"]["met"] is True  # 99 >= 0.98 * 100
    assert by_fig["rate"]["target"] == "≥ 0.98× plain"


def test_render_markdown_has_header_rows_and_skips(tmp_path: Path) -> None:
    md = render_markdown(_results())
    assert "2 CPUs" in md and "24 GiB" in md and "ray not installed" in md
    assert "| `demo` | seconds | 1.20 s (1.00–2.00) | plain | 3.00 s | 0.4× | ≤ 1.5 s | ✅ |" in md
    render_chart(_results(), tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0


def test_every_case_declares_figures_and_a_tandem_variant() -> None:
    for name in CASE_NAMES:
        case = load_case(name)
        assert case.doc.strip() and "Target" in case.doc
        params = case.resolve_params(smoke=True)
        assert case.figures_for(params)
        assert case.variants[0].name == "tandem"


def test_error_headline_finds_the_exception_line() -> None:
    err = "exit code 1\nTraceback (most recent call last):\n  File x\nValueError: bad\n\n(log: /tmp/x)"
    assert error_headline(err) == "ValueError: bad"


def test_smoke_output_goes_to_a_temp_dir_not_the_published_figures() -> None:
    from benchmarks.run import parse_args

    smoke = parse_args(["--smoke"])
    assert smoke.out.resolve() != (Path("docs") / "benchmarks").resolve()
    assert "tandem-bench-smoke-" in str(smoke.out)
    smoke.out.rmdir()
    assert parse_args([]).out == Path("docs/benchmarks")
    assert parse_args(["--smoke", "--out", "x"]).out == Path("x")
