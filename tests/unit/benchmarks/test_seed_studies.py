"""The ASHA and PBT seed studies (issue 17, items 4 and 7) run end to end on tiny sizes,
tandem and Optuna only (Ray's side is minutes per seed; the published figures in
docs/benchmarks.md were taken with it). Checks the harness and the replay, not speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]


def _run(*args: str) -> str:
    proc = subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=220, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return proc.stdout


def test_asha_seeds_records_runs_tables_and_replays_them(tmp_path: Path) -> None:
    out = tmp_path / "asha.jsonl"
    small = ["--set", "trials=9", "--set", "step_s=0.001"]
    _run("benchmarks.asha_seeds", "--systems", "tandem,optuna", "--seeds", "0-1",
         "--out", str(out), *small)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["system"], r["seed"]) for r in rows) == [
        ("optuna", 0), ("optuna", 1), ("tandem", 0), ("tandem", 1)]
    for r in rows:
        assert "error" not in r, r.get("error")
        assert r["regret"] >= 0 and r["total_steps"] >= 9  # every trial reached rung 1
        if r["system"] == "tandem":  # every trial's rows with their report times
            assert len(r["trace"]) == 9
    table = _run("benchmarks.asha_seeds", "--table", "--out", str(out))
    assert "| tandem | 2 (common) |" in table and "tandem vs optuna, 2 paired seeds" in table
    # the runs' own decisions are what both schedulers decide on the same result order
    replay = _run("benchmarks.asha_seeds", "--replay", "--out", str(out))
    tandem_lines = [line for line in replay.splitlines() if line.startswith("tandem seed")]
    assert len(tandem_lines) == 2
    # a run already recorded is skipped when the command is run again
    _run("benchmarks.asha_seeds", "--systems", "tandem", "--seeds", "0", "--out", str(out),
         *small)
    assert len(out.read_text().splitlines()) == 4


def test_pbt_exploits_counts_a_tandem_run(tmp_path: Path) -> None:
    out = tmp_path / "pbt.jsonl"
    _run("benchmarks.pbt_exploits", "--systems", "tandem", "--seeds", "0", "--iters", "15",
         "--out", str(out))
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert "error" not in row, row.get("error")
    assert row["errors"] == []
    assert row["exploits"] == row["exploit_log_lines"]  # the counter and the log agree
    assert row["final_iterations"] == [15] * 4  # every trial ran to the stop; none hung
    assert "| 15 | tandem | 1 |" in _run("benchmarks.pbt_exploits", "--table", "--out", str(out))
