"""A run folder: ``params.json``, ``result.json``, ``progress.csv``, ``error.txt``, logs.

Results are appended as they arrive. On a local path they go straight into the run
folder; on a remote fsspec URL they are staged in a local folder and uploaded whenever a
checkpoint is committed and when the run ends.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from typing import Any

import cloudpickle

from tandem.train.api.checkpoint import _is_url, get_fs
from tandem.train.api.result import ERROR_FILE, PARAMS_FILE, PROGRESS_FILE, RESULT_FILE

CHECKPOINT_STATE_FILE = "checkpoints.json"
"""The run's committed checkpoints (iteration, folder name), rewritten at every commit: what
a later ``fit()`` with the same ``(storage_path, name)`` resumes from."""


def _json_default(o: object) -> object:
    item = getattr(o, "item", None)
    if item is not None:
        try:
            return item()
        except Exception:
            pass
    return repr(o)


class RunStorage:
    """Writes one run folder. Not thread-safe: its controller alone writes it.

    With ``result_files=False`` (a Tuner's trial) it writes no ``params.json``,
    ``result.json`` or ``progress.csv``: the tuner's logger callbacks are their only writer."""

    def __init__(self, run_path: str, result_files: bool = True) -> None:
        self.run_path = run_path
        self.result_files = result_files
        self.remote = _is_url(run_path)
        if self.remote:
            self.local_dir = tempfile.mkdtemp(prefix="tandem-run-")
            fs, p = get_fs(run_path)
            fs.makedirs(p, exist_ok=True)
        else:
            self.local_dir = run_path
            os.makedirs(run_path, exist_ok=True)
        self.log_dir = os.path.join(self.local_dir, "logs")
        os.makedirs(self.log_dir, exist_ok=True)
        self._result: Any = None
        self._progress: Any = None
        self._csv: csv.DictWriter | None = None
        self._csv_fields: list[str] | None = None
        if result_files:
            self._open_result_files()

    def _open_result_files(self) -> None:
        self._result = open(os.path.join(self.local_dir, RESULT_FILE), "a", buffering=1 << 16)
        progress_path = os.path.join(self.local_dir, PROGRESS_FILE)
        self._csv_fields = _read_csv_header(progress_path)
        self._progress = open(progress_path, "a", newline="", buffering=1 << 16)  # noqa: SIM115
        if self._csv_fields is not None:
            self._csv = csv.DictWriter(self._progress, self._csv_fields, extrasaction="ignore")

    def log_path(self, rank: int, attempt: int = 0) -> str:
        return os.path.join(self.log_dir, f"rank_{rank}.log")

    def write_params(self, config: object) -> None:
        if not self.result_files:
            return
        with open(os.path.join(self.local_dir, PARAMS_FILE), "w") as f:
            json.dump(config if config is not None else {}, f, indent=2, default=_json_default)
        if self.remote:
            self.upload([PARAMS_FILE])

    def append(self, rows: Iterable[dict]) -> None:
        if not self.result_files:
            return
        dumps = json.dumps
        write = self._result.write
        rows = list(rows)
        for row in rows:
            write(dumps(row, default=_json_default))
            write("\n")
        if self._csv is None and rows:
            self._csv_fields = list(rows[0])
            self._csv = csv.DictWriter(self._progress, self._csv_fields, extrasaction="ignore")
            self._csv.writeheader()
        if self._csv is not None:
            self._csv.writerows(rows)
        self._result.flush()
        self._progress.flush()

    def rewind(self, iteration: int) -> int:
        """Drops the rows after ``iteration`` from ``result.json`` and ``progress.csv``: a run
        (re)started from the checkpoint of ``iteration`` (or from scratch, 0) reports those
        iterations again, and each is kept once, from the lineage that goes on. Returns how
        many rows were dropped (none without ``result_files``: the tuner's loggers append,
        as Ray's do)."""
        if not self.result_files:
            return 0
        self._result.flush()
        self._progress.flush()
        result_path = os.path.join(self.local_dir, RESULT_FILE)
        with open(result_path) as f:
            lines = f.readlines()
        keep = [ln for ln in lines if _row_iteration(ln) <= iteration]
        dropped = len(lines) - len(keep)
        if not dropped:
            return 0
        self._result.close()
        self._progress.close()
        with open(result_path, "w") as f:
            f.writelines(keep)
        progress_path = os.path.join(self.local_dir, PROGRESS_FILE)
        if self._csv_fields is not None and os.path.exists(progress_path):
            with open(progress_path, newline="") as f:
                reader = csv.DictReader(f)
                rows = [r for r in reader
                        if _int_or(r.get("training_iteration"), 0) <= iteration]
            with open(progress_path, "w", newline="") as f:
                w = csv.DictWriter(f, self._csv_fields, extrasaction="ignore")
                w.writeheader()
                w.writerows(rows)
        self._result = open(result_path, "a", buffering=1 << 16)  # noqa: SIM115
        self._progress = open(progress_path, "a", newline="", buffering=1 << 16)  # noqa: SIM115
        if self._csv_fields is not None:
            self._csv = csv.DictWriter(self._progress, self._csv_fields, extrasaction="ignore")
        self.sync()
        return dropped

    def write_checkpoint_state(self, kept: Iterable[tuple[int, Any, dict]],
                               latest: tuple[int, Any, dict] | None,
                               pending: Mapping[int, tuple[str, object]] | None = None) -> None:
        """Writes ``checkpoints.json``: the committed checkpoints, the latest, and those
        whose validation is ``pending`` (iteration -> (path, validation spec), the spec
        cloudpickled) so that a run resuming this one runs those validations again."""
        state: dict[str, Any] = {
            "committed": [[it, os.path.basename(c.path.rstrip("/"))] for it, c, _ in kept],
            "latest": ([latest[0], os.path.basename(latest[1].path.rstrip("/"))]
                       if latest is not None else None),
        }
        if pending:
            state["pending_validation"] = [
                [it, os.path.basename(path.rstrip("/")),
                 base64.b64encode(cloudpickle.dumps(spec)).decode()]
                for it, (path, spec) in sorted(pending.items())]
        path = os.path.join(self.local_dir, CHECKPOINT_STATE_FILE)
        with open(path + ".tmp", "w") as f:
            json.dump(state, f)
        os.replace(path + ".tmp", path)
        if self.remote:
            self.upload([CHECKPOINT_STATE_FILE])

    def write_error(self, text: str) -> None:
        with open(os.path.join(self.local_dir, ERROR_FILE), "w") as f:
            f.write(text)
        if self.remote:
            self.upload([ERROR_FILE])

    def sync(self) -> None:
        """Uploads the result files (remote storage only)."""
        if self.remote and self.result_files:
            self.upload([RESULT_FILE, PROGRESS_FILE])

    def upload(self, names: list[str]) -> None:
        fs, p = get_fs(self.run_path)
        for name in names:
            src = os.path.join(self.local_dir, name)
            if os.path.exists(src):
                fs.put_file(src, p.rstrip("/") + "/" + name)

    def close(self) -> None:
        for f in (self._result, self._progress):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass
        if self.remote:
            if self.result_files:
                self.upload([RESULT_FILE, PROGRESS_FILE])
            fs, p = get_fs(self.run_path)
            fs.put(self.log_dir + "/", p.rstrip("/") + "/logs/", recursive=True)
            shutil.rmtree(self.local_dir, ignore_errors=True)


def _read_csv_header(path: str) -> list[str] | None:
    if not os.path.exists(path) or os.path.getsize(path) == 0:
        return None
    with open(path, newline="") as f:
        first = f.readline()
    return next(csv.reader(io.StringIO(first))) if first.strip() else None


def _int_or(value: Any, default: int) -> int:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return default


def _row_iteration(line: str) -> int:
    if not line.strip():
        return 0
    try:
        return _int_or(json.loads(line).get("training_iteration"), 0)
    except ValueError:
        return 0
