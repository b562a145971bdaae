"""docs/scheduling.md's examples run as written (an example in the docs is a test)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))))


def test_scheduling_doc_blocks_run(tmp_path):
    with open(os.path.join(ROOT, "docs", "scheduling.md")) as f:
        text = f.read()
    code = "\n".join(re.findall(r"```python\n(.*?)```", text, re.DOTALL))
    script = tmp_path / "scheduling.py"
    script.write_text(code)
    env = {**os.environ, "TANDEM_STORAGE_PATH": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "2"
