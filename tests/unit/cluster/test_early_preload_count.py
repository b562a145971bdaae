"""``warming()`` of a cluster that adopted a zygote started early: the early zygote's own
"preloaded" answers come first on its pipe, and must not count as the answer to the
cluster's own preload (``warming()`` said False while the cluster's import still ran)."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

from tandem.cluster import local
from tandem.cluster.local import LocalCluster, discard_early_zygote, start_zygote_early

pytestmark = pytest.mark.timeout(120)

# A module whose import waits until its flag file exists: the test decides when the zygote's
# import of it ends (and so when its "preloaded" answer is sent).
GATE = """
import os
import time

while not os.path.exists({flag!r}):
    time.sleep(0.005)
"""


def _wait(cond, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.005)


def test_warming_counts_the_adopted_early_zygotes_preloads(tmp_path, monkeypatch):
    import tandem.cluster._worker_main  # noqa: F401 - a driver may import it (see there)

    monkeypatch.setenv("TANDEM_WARM_HOST", "0")  # this process's own zygote
    for name in ("tandem_gate_early", "tandem_gate_ours"):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(
            GATE.format(flag=str(tmp_path / f"{name}.go"))))
    monkeypatch.syspath_prepend(str(tmp_path))  # the zygote's PYTHONPATH is our sys.path
    assert start_zygote_early(("tandem_gate_early",))
    cluster = LocalCluster(num_cpus=1)
    try:
        cluster.prewarm(("tandem_gate_ours",))  # adopts the early zygote, then asks for ours
        io = cluster._io
        assert io is not None
        assert cluster.warming()
        asked = io.preloads_out  # both imports are held back: no answer was read yet
        (tmp_path / "tandem_gate_early.go").touch()
        # the early zygote's answer arrives and is counted; ours is still importing
        _wait(lambda: io.preloads_out < asked, "the early zygote's preload answer")
        assert cluster.warming(), "warm before the cluster's own preload was done"
        (tmp_path / "tandem_gate_ours.go").touch()
        _wait(lambda: not cluster.warming(), "the cluster's own preload")
        assert io.preloads_out == 0
    finally:
        cluster.shutdown()
        discard_early_zygote()
        for name in ("tandem_gate_early", "tandem_gate_ours"):
            sys.modules.pop(name, None)
        assert local.early_zygote_pid() is None
