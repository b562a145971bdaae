"""Training callbacks for the 1.x ``Trainer.run(..., callbacks=[...])``.

A callback's hooks run in the driver, on the thread that called ``run``:
``start_training(logdir, config)`` before the workers start, ``handle_result(results)``
once per report with every worker's report dict (rank order), and
``finish_training(error)`` at the end, also after a failure.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
from collections.abc import Sequence
from typing import Any

from tandem._core.extras import import_optional
from tandem.train.api.callback import Callback

__all__ = [
    "JsonLoggerCallback",
    "PrintCallback",
    "TBXLoggerCallback",
    "TrainingCallback",
]


class TrainingCallback(Callback):
    """Base class of the 1.x ``Trainer.run(callbacks=[...])`` callbacks: every hook is a
    no-op; override the ones you need. (A ``tandem.train.Callback``: in
    ``RunConfig(callbacks=...)`` its run hooks are called too.)"""

    def start_training(self, logdir: str, config: dict[str, Any], **info: object) -> None:
        """Called before the run starts; ``logdir`` is the run folder (``run_NNN``)."""

    def process_results(self, results: list[dict[str, Any]], **info: object) -> None:
        """Called by the Trainer for every report; passes them on to ``handle_result``."""
        self.handle_result(results, **info)

    def handle_result(self, results: list[dict[str, Any]], **info: object) -> None:
        """``results[i]`` is worker ``i``'s report for this step."""

    def finish_training(self, error: bool = False, **info: object) -> None:
        """Called when the run ends; ``error`` tells whether it failed."""


def _select(results: list[dict], workers: int | Sequence[int] | None) -> list[dict]:
    if workers is None:
        return list(results)
    if isinstance(workers, int):
        return [results[workers]]
    return [results[i] for i in workers]


def _json_default(o: object) -> object:
    for name in ("item", "tolist"):  # NumPy/torch scalars and arrays
        convert = getattr(o, name, None)
        if convert is not None:
            with contextlib.suppress(Exception):
                return convert()
    return repr(o)


class JsonLoggerCallback(TrainingCallback):
    """Writes the reports to ``<logdir>/results.json``: a JSON list with one entry per report,
    each a list of the chosen workers' report dicts.

    Args:
        logdir: where to write (default: the run folder).
        filename: the file name (default ``results.json``).
        workers_to_log: a rank, a list of ranks, or None for every worker (default rank 0).
    """

    _default_filename = "results.json"

    def __init__(
        self,
        logdir: str | None = None,
        filename: str | None = None,
        workers_to_log: int | Sequence[int] | None = 0,
    ) -> None:
        self._given_logdir = logdir
        self._filename = filename or self._default_filename
        self._workers = workers_to_log
        self._logdir: str | None = None
        self._count = 0

    @property
    def logdir(self) -> str | None:
        return self._logdir

    @property
    def log_path(self) -> str | None:
        return os.path.join(self._logdir, self._filename) if self._logdir else None

    def start_training(self, logdir: str, config: dict[str, Any] | None = None, **info: object) -> None:
        self._logdir = os.path.expanduser(self._given_logdir or logdir)
        os.makedirs(self._logdir, exist_ok=True)
        with open(self.log_path, "w") as f:  # type: ignore[arg-type]
            f.write("[]")
        self._count = 0

    def handle_result(self, results: list[dict[str, Any]], **info: object) -> None:
        if self.log_path is None:
            return
        entry = json.dumps(_select(results, self._workers), default=_json_default)
        # Append to the JSON list in place: overwrite its closing bracket.
        with open(self.log_path, "r+b") as f:
            f.seek(-1, os.SEEK_END)
            f.write(((", " if self._count else "") + entry + "]").encode())
        self._count += 1


class PrintCallback(TrainingCallback):
    """Prints every step's reports (all workers) as indented JSON."""

    def handle_result(self, results: list[dict[str, Any]], **info: object) -> None:
        print(json.dumps(results, default=_json_default, indent=4))


class TBXLoggerCallback(TrainingCallback):
    """Writes one worker's numeric metrics to TensorBoard event files (needs ``tensorboardX``).

    Scalars are logged as ``tandem/train/<metric>`` (nested dicts joined with ``/``) at step
    ``_training_iteration``; lists of numbers as histograms.

    Args:
        logdir: where to write the event files (default: the run folder).
        worker_to_log: the rank whose reports are logged (default 0).
    """

    def __init__(self, logdir: str | None = None, worker_to_log: int = 0) -> None:
        self._given_logdir = logdir
        self._worker = worker_to_log
        self._writer: Any = None
        self.logdir: str | None = None

    def start_training(self, logdir: str, config: dict[str, Any] | None = None, **info: object) -> None:
        SummaryWriter = import_optional("tensorboardX", "tensorboard",
                                        "TBXLoggerCallback").SummaryWriter
        self.logdir = os.path.expanduser(self._given_logdir or logdir)
        self._writer = SummaryWriter(self.logdir, flush_secs=30)

    def handle_result(self, results: list[dict[str, Any]], **info: object) -> None:
        if self._writer is None:
            return
        result = results[self._worker]
        step = result.get("_training_iteration")
        for key, value in _flatten(result).items():
            if key.startswith("_"):
                continue
            tag = f"tandem/train/{key}"
            if isinstance(value, bool):
                continue
            if isinstance(value, (int, float)):
                if not (isinstance(value, float) and math.isnan(value)):
                    self._writer.add_scalar(tag, value, global_step=step)
            elif isinstance(value, list) and value and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value
            ):
                try:
                    self._writer.add_histogram(tag, value, global_step=step)
                except (ValueError, TypeError):
                    pass
        self._writer.flush()

    def finish_training(self, error: bool = False, **info: object) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


def _flatten(d: dict, prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, name + "/"))
        else:
            out[name] = value
    return out
