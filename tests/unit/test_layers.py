"""The layer order of shared/DESIGN.md, enforced by import-linter's contracts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


@pytest.mark.timeout(120)
def test_import_linter_contracts_hold():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    assert exe, "import-linter is part of the dev extra: pip install -e '.[dev]'"
    proc = subprocess.run([exe, "--no-cache"], cwd=root, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout


def test_import_tandem_is_light():
    code = ("import sys, tandem, tandem.train, tandem.train.torch; "
            "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules), 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # the driver never needs torch or pandas to start
