"""The zygotes (``tandem.cluster._zygote``) this test process started: what the early-start
tests count to tell whether one was started, adopted or ended."""

from __future__ import annotations

import psutil


def zygotes() -> list[psutil.Process]:
    """This process's children that run the zygote."""
    out = []
    for p in psutil.Process().children():
        try:
            if "tandem.cluster._zygote" in " ".join(p.cmdline()):
                out.append(p)
        except psutil.Error:
            pass
    return out
