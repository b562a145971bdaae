"""``ray.tune.logger``'s path: ``LoggerCallback`` (the base of experiment loggers), the
loggers that write each trial's files (``JsonLoggerCallback``: ``result.json``,
``params.json``, ``params.pkl``; ``CSVLoggerCallback``: ``progress.csv``) and the
TensorBoard logger callback.

As in Ray, ``Tuner.fit()`` adds a ``CSVLoggerCallback`` and a ``JsonLoggerCallback`` unless
one of that class is already in ``RunConfig(callbacks=...)`` or the environment sets
``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1`` (see :func:`with_default_loggers`). They are the
only writers of those files for a Tuner's trials: a trial started again (resumed, restarted,
``Tuner.restore``) appends to what it wrote before, as Ray's do.
"""

from __future__ import annotations

import csv
import functools
import json
import logging
import os
import pickle
import queue
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import cloudpickle

from tandem.train.api.checkpoint import get_fs
from tandem.tune.callback import LoggerCallback, TBXLoggerCallback
from tandem.tune.result import (
    EXPR_PARAM_FILE,
    EXPR_PARAM_PICKLE_FILE,
    EXPR_PROGRESS_FILE,
    EXPR_RESULT_FILE,
)
from tandem.tune.utils import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial

__all__ = [
    "CSVLoggerCallback",
    "JsonLoggerCallback",
    "LoggerCallback",
    "TBXLoggerCallback",
    "pretty_print",
]

logger = logging.getLogger(__name__)

DISABLE_AUTO_LOGGERS_ENV = "TUNE_DISABLE_AUTO_CALLBACK_LOGGERS"
"""Ray's switch: ``"1"`` keeps ``Tuner.fit()`` from adding the CSV and JSON loggers."""


def with_default_loggers(callbacks: list[Any], disabled: bool) -> list[Any]:
    """``callbacks`` plus a ``CSVLoggerCallback`` and a ``JsonLoggerCallback`` where none of
    that class is among them (Ray's ``_create_default_callbacks``); ``callbacks`` as they are
    when ``disabled`` (``TUNE_DISABLE_AUTO_CALLBACK_LOGGERS=1``, read by ``Tuner.fit()``).

    Ray also adds a ``TBXLoggerCallback`` when ``tensorboardX`` imports; tandem adds it only
    when asked for (``RunConfig(callbacks=[TBXLoggerCallback()])``): TensorBoard files for
    every trial cost a writer thread per trial."""
    out = list(callbacks)
    if disabled:
        return out
    if not any(isinstance(cb, CSVLoggerCallback) for cb in out):
        out.append(CSVLoggerCallback())
    if not any(isinstance(cb, JsonLoggerCallback) for cb in out):
        out.append(JsonLoggerCallback())
    return out


def _trial_path(trial: TuneTrial) -> str:
    path = getattr(trial, "path", None) or getattr(trial, "local_path", None)
    if not path:
        raise ValueError(
            f"{trial!r} has no folder (trial.path is {path!r}): a logger callback writes into "
            f"the trial's folder; use it in a Tuner's RunConfig(callbacks=[...])."
        )
    return str(path)


class _TrialFile:
    """One file of a trial's folder that rows are appended to: in the folder itself, or,
    for an fsspec URL, in a local copy that starts from what the URL holds and is uploaded
    by :meth:`sync` (at each checkpoint and at the trial's end).

    Rows are kept in memory and handed to the file writer (:data:`_WRITER`) as one text
    when :meth:`flush` is called (the logger does it at the end of every step of the tuning
    loop, at every checkpoint and when the trial ends). The writer opens the file with its
    first text and writes each with one ``os.write``: no Python file object per file.
    ``header`` (a CSV header row) goes first where the file is empty when opened, so a
    trial started again appends without a second one. ``write`` makes it the file
    ``csv.writer`` writes to. A file on a URL is written here, not by the writer."""

    def __init__(self, folder: str, name: str,
                 do: Callable[..., None] | None = None) -> None:
        self.url: str | None = None
        self._stage: str | None = None
        self.folder = folder
        if "://" in folder:
            self.url = folder.rstrip("/") + "/" + name
            self._stage = tempfile.mkdtemp(prefix="tandem-log-")
            local = os.path.join(self._stage, name)
            fs, p = get_fs(self.url)
            if fs.exists(p):  # a trial started again goes on from what it wrote before
                fs.get_file(p, local)
            self.folder = self._stage
        else:
            local = os.path.join(folder, name)
        self.local = local
        self.header: str | None = None
        self.rows: list[str] = []
        self._fd: int | None = None  # used by the writer only (here, for a URL)
        # how a write is done: handed to the writer thread (``_WRITER.submit``), or at once
        self._do: Callable[..., None] = do if do is not None and self.url is None else _call

    def write(self, text: str) -> None:
        self.rows.append(text)

    def open(self) -> None:
        """Creates the file now (empty where it is new), as Ray's loggers do when a trial
        starts."""
        self._do(self._write, b"")

    def flush(self) -> None:
        if self.rows:
            data = "".join(self.rows).encode()
            self.rows.clear()
            self._do(self._write, data)

    def sync(self) -> None:
        self.flush()
        if self.url is not None:
            fs, p = get_fs(self.url)
            fs.put_file(self.local, p)

    def close(self) -> None:
        try:
            self.sync()
        finally:
            self._do(self._close)
            if self._stage is not None:
                shutil.rmtree(self._stage, ignore_errors=True)

    def _write(self, data: bytes) -> None:
        fd = self._fd
        if fd is None:
            fd = self._fd = _open_in(self.folder, self.local, _APPEND)
            if self.header is not None and os.lseek(fd, 0, os.SEEK_END) == 0:
                data = self.header.encode() + data
        _write_all(fd, data)

    def _close(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _call(fn: Callable[..., None], *args: object) -> None:
    fn(*args)


_Write = tuple[int, Callable[..., None], tuple[object, ...]]  # id(owner), fn, args


class _Writer:
    """The local file writes of the logger callbacks, done in order on one thread: the
    tuning loop hands over the bytes of a trial's four files (a batch at the end of each of
    its steps, at a trial's end) and goes on while they are created and written.
    :meth:`drain` waits until everything handed over is written (the loggers call it when the
    experiment ends, so every row is on disk when ``Tuner.fit()`` returns) and raises the
    first ``OSError`` one logger's writes met since its last drain: each logger hears of its
    own files only, so two experiments running in one process do not fail each other."""

    def __init__(self) -> None:
        self._q: queue.SimpleQueue[list[_Write]] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None
        self._errors: dict[int, OSError] = {}  # id(owner) -> the first error of its writes
        self._batch: list[_Write] = []
        self._pending = 0  # batches handed over, not yet written

    def submit(self, owner: object, fn: Callable[..., None], *args: object) -> None:
        """Adds ``fn(*args)`` to the batch :meth:`kick` hands over; an ``OSError`` it raises
        is ``owner``'s (see :meth:`drain`)."""
        with self._lock:
            self._batch.append((id(owner), fn, args))

    def kick(self) -> None:
        """Hands what was submitted since the last kick to the thread: one wake-up of the
        thread per step of the tuning loop, not one per file."""
        with self._lock:
            if not self._batch:
                return
            batch, self._batch = self._batch, []
            self._pending += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tandem-tune-files",
                                                daemon=True)
                self._thread.start()
        self._q.put(batch)

    def wait(self) -> None:
        """Returns once everything submitted so far is written (or failed)."""
        self.kick()
        with self._lock:
            self._idle.wait_for(lambda: self._pending == 0)

    def drain(self, owner: object) -> None:
        """:meth:`wait`, then raises the first ``OSError`` ``owner``'s writes met since its
        last drain."""
        self.wait()
        with self._lock:
            error = self._errors.pop(id(owner), None)
        if error is not None:
            raise error

    def _run(self) -> None:
        while True:
            for owner, fn, args in self._q.get():
                try:
                    fn(*args)
                except OSError as e:
                    logger.warning("could not write a trial's result file: %s", e)
                    with self._lock:
                        self._errors.setdefault(owner, e)
            with self._lock:
                self._pending -= 1
                if self._pending == 0:
                    self._idle.notify_all()


_WRITER = _Writer()


def wait_for_files() -> None:
    """Waits until what the logger callbacks handed to their writer thread so far is on
    disk: for a callback that reads a trial's folder when the trial ends (e.g. to upload
    it, as ``MLflowLoggerCallback(save_artifact=True)`` does); any thread may call it."""
    _WRITER.wait()


def _writer_after_fork() -> None:
    global _WRITER
    _WRITER = _Writer()  # a forked child has no writer thread: it starts its own


os.register_at_fork(after_in_child=_writer_after_fork)

_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND | getattr(os, "O_CLOEXEC", 0)
_REPLACE = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _write_whole(folder: str, name: str, data: bytes,
                 do: Callable[..., None] = _call) -> None:
    if "://" in folder:
        fs, p = get_fs(folder.rstrip("/") + "/" + name)
        fs.makedirs(p.rsplit("/", 1)[0], exist_ok=True)
        with fs.open(p, "wb") as f:
            f.write(data)
        return
    do(_replace_file, folder, os.path.join(folder, name), data)


def _replace_file(folder: str, path: str, data: bytes) -> None:
    fd = _open_in(folder, path, _REPLACE)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def _open_in(folder: str, path: str, flags: int) -> int:
    """``os.open(path, flags)``, making ``folder`` first where it does not exist yet (tried
    first: a file created in a folder that exists costs one system call, not four)."""
    try:
        return os.open(path, flags, 0o666)
    except FileNotFoundError:
        try:
            os.mkdir(folder)
        except FileNotFoundError:  # its parent is missing too
            os.makedirs(folder, exist_ok=True)
        except FileExistsError:
            pass
        return os.open(path, flags, 0o666)


class _FileLogger(LoggerCallback):
    """Keeps one file per running trial. Ray's loggers write and flush each row as it comes;
    these hand the rows of a trial to the file writer thread at the end of every step of
    the tuning loop (``on_step_end``: a batch of results), at every checkpoint (and wait
    until they are written) and when the trial ends; the writer is drained when the
    experiment ends. A reader sees every row once ``Tuner.fit()`` returns, every row up to
    a checkpoint once it is reported, and, while a trial runs, the rows of the steps
    before a moment ago.

    The writer thread is used only inside a tuning loop: from ``setup()`` (which the loop
    calls before any trial starts) to ``on_experiment_end()`` (which drains it). A program
    that calls the hooks itself, as Ray's own tests do, gets Ray's behaviour: each file is
    written before the hook returns."""

    def __init__(self) -> None:
        self._trial_files: dict[str, _TrialFile] = {}
        self._unflushed: dict[str, _TrialFile] = {}  # files with rows not written yet
        self._do: Callable[..., None] = _call  # _WRITER.submit inside a tuning loop

    def setup(self, **info: object) -> None:
        super().setup(**info)
        self._do = functools.partial(_WRITER.submit, self)

    def _row_added(self, trial_id: str, f: _TrialFile) -> None:
        if self._do is _call:  # outside a tuning loop: written now, as Ray's loggers do
            f.flush()
        else:
            self._unflushed[trial_id] = f

    def _file(self, trial: TuneTrial, name: str) -> _TrialFile:
        return _TrialFile(_trial_path(trial), name, self._do)

    def _close(self, trial: TuneTrial) -> None:
        f = self._trial_files.pop(trial.trial_id, None)
        self._unflushed.pop(trial.trial_id, None)
        if f is not None:
            f.close()

    def log_trial_save(self, trial: TuneTrial) -> None:
        f = self._trial_files.get(trial.trial_id)
        if f is not None:
            f.sync()
            _WRITER.drain(self)  # the rows up to a checkpoint are on disk before it is recorded

    def log_trial_end(self, trial: TuneTrial, failed: bool = False) -> None:
        self._close(trial)
        _WRITER.kick()

    def on_step_end(self, iteration: int, trials: Sequence[TuneTrial], **info: object) -> None:
        if self._unflushed:
            for f in self._unflushed.values():
                f.flush()
            self._unflushed.clear()
        _WRITER.kick()

    def on_experiment_end(self, trials: Sequence[TuneTrial], **info: object) -> None:
        try:
            for f in self._trial_files.values():
                f.close()
        finally:
            self._trial_files.clear()
            self._unflushed.clear()
            self._do = _call
            _WRITER.drain(self)  # every row on disk when fit() returns


class JsonLoggerCallback(_FileLogger):
    """Writes each trial's results to ``result.json`` in its folder, one JSON object a line,
    and its config to ``params.json`` (sorted keys) and ``params.pkl`` (cloudpickle), as
    Ray's ``JsonLoggerCallback``. A trial started again appends to its ``result.json``."""

    _SAVED_FILE_TEMPLATES: ClassVar[list[str]] = [EXPR_RESULT_FILE, EXPR_PARAM_FILE,
                                                  EXPR_PARAM_PICKLE_FILE]

    def __init__(self) -> None:
        super().__init__()
        self._trial_configs: dict[str, dict] = {}

    def log_trial_start(self, trial: TuneTrial) -> None:
        self._close(trial)
        self.update_config(trial, trial.config)
        f = self._trial_files[trial.trial_id] = self._file(trial, EXPR_RESULT_FILE)
        f.open()

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        f = self._trial_files.get(trial.trial_id)
        if f is None:
            self.log_trial_start(trial)
            f = self._trial_files[trial.trial_id]
        f.rows.append(_ENCODER.encode(result) + "\n")
        self._row_added(trial.trial_id, f)

    def update_config(self, trial: TuneTrial, config: dict[str, Any]) -> None:
        """Writes ``config`` as the trial's ``params.json`` and ``params.pkl``."""
        self._trial_configs[trial.trial_id] = config
        folder = _trial_path(trial)
        _write_whole(folder, EXPR_PARAM_FILE, _params_json(config).encode(), self._do)
        _write_whole(folder, EXPR_PARAM_PICKLE_FILE, _pickled(config), self._do)


class CSVLoggerCallback(_FileLogger):
    """Writes each trial's results to ``progress.csv`` in its folder, as Ray's
    ``CSVLoggerCallback``: nested dicts flattened (``{"a": {"b": 1}}`` -> column ``a/b``),
    ``config`` left out, the columns those of the trial's first result (later keys are
    dropped). A trial started again appends, without a second header row."""

    _SAVED_FILE_TEMPLATES: ClassVar[list[str]] = [EXPR_PROGRESS_FILE]

    def __init__(self) -> None:
        super().__init__()
        self._trial_csv: dict[str, tuple[Any, list[str]] | None] = {}

    def _setup_trial(self, trial: TuneTrial) -> _TrialFile:
        self._close(trial)
        f = self._file(trial, EXPR_PROGRESS_FILE)
        self._trial_files[trial.trial_id] = f
        self._trial_csv[trial.trial_id] = None
        return f

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        tid = trial.trial_id
        f = self._trial_files.get(tid)
        if f is None:
            f = self._setup_trial(trial)
        row = result
        # the common row holds only scalars: checked by type in C, flattened otherwise
        if "config" in row or not all(map(_FLAT_TYPES.__contains__, map(type, row.values()))):
            if "config" in row or any(isinstance(v, dict) for v in row.values()):
                row = dict(row)
                row.pop("config", None)
                row = flatten_dict(row, delimiter="/")
        entry = self._trial_csv.get(tid)
        if entry is None:
            entry = (csv.writer(f), list(row))
            self._trial_csv[tid] = entry
            header = _Text()
            csv.writer(header).writerow(entry[1])
            f.header = "".join(header.rows)  # written where the file is empty
        writer, fields = entry
        writer.writerow(map(row.get, fields))  # a key the first result lacked: dropped
        self._row_added(tid, f)

    def _close(self, trial: TuneTrial) -> None:
        self._trial_csv.pop(trial.trial_id, None)
        super()._close(trial)


def pretty_print(result: Mapping[str, object], exclude: set[str] | None = None) -> str:
    """A result dict as YAML text, without ``config``, ``hist_stats``, None values and the
    keys in ``exclude`` (Ray's ``pretty_print``); values YAML cannot hold are shown as
    strings."""
    import yaml  # type: ignore[import-untyped,unused-ignore]

    out = {k: v for k, v in result.items()
           if k not in ("config", "hist_stats") and v is not None
           and (exclude is None or k not in exclude)}
    cleaned = json.loads(json.dumps(out, default=_fallback))
    return str(yaml.safe_dump(cleaned, default_flow_style=False))


_PARAMS_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",\n  ", ": "))


def _params_json(config: object) -> str:
    """``params.json``'s text: ``json.dumps(config, indent=2, sort_keys=True)``. With
    ``indent`` json encodes in Python (~20 µs a trial even for ``{}``); a flat config of
    plain values (string keys; numbers, strings, booleans, None) is encoded in C with the
    same separators, the same text."""
    if isinstance(config, dict) and type(config) is dict and all(
            type(k) is str and type(v) in _FLAT_TYPES for k, v in config.items()):
        if not config:
            return "{}"
        return "{\n  " + _PARAMS_ENCODER.encode(config)[1:-1] + "\n}"
    return json.dumps(config, indent=2, sort_keys=True, default=_json_fallback)


def _pickled(config: dict[str, Any]) -> bytes:
    """``cloudpickle.dumps(config)``; a config of plain values (dicts with string keys,
    lists, tuples, numbers, strings) by ``pickle.dumps`` with cloudpickle's protocol: the
    same bytes, without building a cloudpickle ``Pickler`` per trial."""
    if _plain(config):
        return pickle.dumps(config, protocol=cloudpickle.DEFAULT_PROTOCOL)
    return cloudpickle.dumps(config)


def _plain(value: object, depth: int = 0) -> bool:
    t = type(value)
    if t in _FLAT_TYPES:
        return True
    if depth > 20:
        return False
    if t is dict and isinstance(value, dict):  # exactly a dict: no subclass's reduce
        return all(type(k) is str and _plain(v, depth + 1) for k, v in value.items())
    if (t is list or t is tuple) and isinstance(value, (list, tuple)):
        return all(_plain(v, depth + 1) for v in value)
    return False


class _Text:
    """What ``csv.writer`` writes, kept as text."""

    def __init__(self) -> None:
        self.rows: list[str] = []

    def write(self, text: str) -> None:
        self.rows.append(text)


_FLAT_TYPES = frozenset({int, float, str, bool, type(None)})


def _json_fallback(value: object) -> object:
    """Ray's ``SafeFallbackEncoder``: arrays as lists, numpy scalars as numbers, the rest as
    ``str``."""
    tolist = getattr(value, "tolist", None)
    ndim: Any = getattr(value, "ndim", 0)
    if callable(tolist) and ndim:
        try:
            return tolist()
        except (TypeError, ValueError):
            pass
    return _fallback(value)


_ENCODER = json.JSONEncoder(default=_json_fallback)


def _fallback(value: object) -> object:
    item = getattr(value, "item", None)
    if callable(item):
        try:
            return item()
        except (TypeError, ValueError):
            pass
    return str(value)
