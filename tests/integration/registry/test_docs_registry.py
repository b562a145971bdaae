"""docs/model_registry.md's python blocks run as written (one script, in order)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__)))))


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_registry_docs_run(tmp_path):
    with open(os.path.join(ROOT, "docs", "model_registry.md")) as f:
        text = f.read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 2
    script = tmp_path / "docs_registry.py"
    script.write_text("\n".join(blocks))
    env = {**os.environ, "HOME": str(tmp_path), "TANDEM_STORAGE_PATH": str(tmp_path / "runs")}
    for key in ("TANDEM_ADDRESS", "TANDEM_MODELS_PATH", "TANDEM_MODELS_STORAGE"):
        env.pop(key, None)
    r = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert "'name': 'tiny', 'versions': 2, 'latest': 2" in lines[0]
    assert lines[1] == "[1, 2]" and lines[-1] == "1"
