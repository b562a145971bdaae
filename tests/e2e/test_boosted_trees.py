"""Boosted trees as a user runs them: the example script, and a LightGBM script, each in a
fresh Python process through the public API only."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def run(args: list[str], cwd: str) -> str:
    env = {**os.environ, "TANDEM_STORAGE_PATH": os.path.join(cwd, "results")}
    proc = subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=280, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_xgboost_breast_cancer_example(tmp_path):
    out = run([os.path.join(ROOT, "examples", "xgboost_breast_cancer.py")], str(tmp_path))
    m = re.search(r"train-logloss ([0-9.]+), valid-error ([0-9.]+) after 20 rounds", out)
    assert m, out
    assert float(m.group(1)) < 0.1 and float(m.group(2)) < 0.1
    best = re.search(r"best max_depth (\d): train-logloss ([0-9.]+)", out)
    assert best and best.group(1) in "456", out
    assert os.path.isdir(tmp_path / "results")


def test_lightgbm_script(tmp_path):
    script = tmp_path / "lgbm.py"
    script.write_text(textwrap.dedent("""
        from sklearn.datasets import load_breast_cancer
        from tandem.train import ScalingConfig
        from tandem.train.lightgbm import LightGBMTrainer

        df = load_breast_cancer(as_frame=True).frame
        result = LightGBMTrainer(
            params={"objective": "binary", "metric": ["binary_logloss", "binary_error"]},
            label_column="target", num_boost_round=10,
            datasets={"train": df.iloc[:450], "valid": df.iloc[450:]},
            scaling_config=ScalingConfig(num_workers=2),
        ).fit()
        booster = LightGBMTrainer.get_model(result.checkpoint)
        print("valid-binary_error", result.metrics["valid-binary_error"])
        print("trees", booster.current_iteration())
    """))
    out = run([str(script)], str(tmp_path))
    assert "trees 10" in out
    assert float(re.search(r"valid-binary_error ([0-9.]+)", out).group(1)) < 0.15


def _doc_blocks() -> list[str]:
    with open(os.path.join(ROOT, "docs", "boosted_trees.md")) as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.DOTALL)


@pytest.mark.parametrize("index", range(len(_doc_blocks())))
def test_docs_page_blocks_run(index, tmp_path):
    script = tmp_path / "snippet.py"
    script.write_text(_doc_blocks()[index])
    run([str(script)], str(tmp_path))
