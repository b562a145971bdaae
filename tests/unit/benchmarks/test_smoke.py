"""The benchmark harness runs end to end on tiny sizes (tandem only, no peers).

Speed is not checked here — CI machines are noisy; ``python -m benchmarks`` measures it.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.cases import CASE_NAMES

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_smoke_run_writes_results_for_every_case(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks",
            "--smoke",
            "--systems",
            "tandem",
            "--repeats",
            "1",
            "--out",
            str(out),
            "--logs",
            str(tmp_path / "logs"),
        ],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=560,  # 75 s on a quiet 2-core machine; every case's processes, under load
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["smoke"] is True
    assert set(results["cases"]) == set(CASE_NAMES)
    if importlib.util.find_spec("matplotlib") is not None:
        assert (out / "chart.png").stat().st_size > 0

    # A tandem variant may be skipped only for a missing optional package (torch).
    failures = {}
    for name, case in results["cases"].items():
        tandem = case["variants"]["tandem"]
        skipped = tandem.get("skipped", "")
        if tandem.get("errors") or "tandem" in skipped or (not tandem.get("runs") and not skipped):
            failures[name] = tandem.get("errors") or skipped or "no measurement"
    assert not failures, "tandem variants failed:\n" + "\n\n".join(
        f"[{name}] {err}" for name, err in failures.items()
    )
