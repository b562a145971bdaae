"""A step-counting train loop's checkpoint, as the elastic tests (local and on Ray) write and
read it: ``{"step": n}`` in ``s.json``, the step to resume at."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any


def resume_step(train: Any) -> int:
    """The step the run's latest checkpoint says to resume at; 0 without one."""
    ckpt = train.get_checkpoint()
    if ckpt is None:
        return 0
    with ckpt.as_directory() as d, open(os.path.join(d, "s.json")) as f:
        return int(json.load(f)["step"])


def report_step(train: Any, metrics: dict[str, Any], resume_at: int | None) -> None:
    """``train.report(metrics)``, with a checkpoint to resume at step ``resume_at`` when it
    is given, from a temporary folder that ends once the report has copied it."""
    if resume_at is None:
        train.report(metrics)
        return
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "s.json"), "w") as f:
            json.dump({"step": resume_at}, f)
        train.report(metrics, checkpoint=train.Checkpoint.from_directory(d))
