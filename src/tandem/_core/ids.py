"""Short, sortable, unique ids."""

from __future__ import annotations

import itertools
import os
import time

_counter = itertools.count()


def new_id(prefix: str = "") -> str:
    """An id unique on this machine: time, pid and a counter, e.g. ``job_7f3a2c01_0004``."""
    stamp = f"{int(time.time() * 1000) & 0xFFFFFFFF:08x}"
    return f"{prefix}{stamp}{os.getpid() & 0xFFFF:04x}_{next(_counter):04d}"


def short_uid(n: int = 5) -> str:
    return os.urandom(8).hex()[:n]
