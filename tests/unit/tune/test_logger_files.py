"""The files Ray's logger callbacks write for each trial (``result.json``, ``progress.csv``,
``params.json``, ``params.pkl``), read the way a user reads them: every row there once the
experiment ends, the rows of a finished step there while it runs, a trial started again
appending. The callbacks are driven directly (their own logic; the Tuner's use of them is
in ``tests/integration/tune/test_logger_callbacks.py``)."""

from __future__ import annotations

import csv
import json
import os
import pickle
import threading
import time
from dataclasses import dataclass, field

import pytest

from tandem.tune.logger import _WRITER, CSVLoggerCallback, JsonLoggerCallback


@dataclass
class _Trial:
    trial_id: str
    path: str
    config: dict = field(default_factory=dict)


def _json_rows(trial: _Trial) -> list[dict]:
    with open(os.path.join(trial.path, "result.json")) as f:
        return [json.loads(line) for line in f]


def _csv_rows(trial: _Trial) -> list[list[str]]:
    with open(os.path.join(trial.path, "progress.csv"), newline="") as f:
        return list(csv.reader(f))


def _rows_there(trial: _Trial, n: int, timeout_s: float = 10.0) -> None:
    """Waits until the trial's files hold ``n`` rows (the writer thread writes them)."""
    deadline = time.monotonic() + timeout_s

    def there() -> bool:
        try:
            return len(_json_rows(trial)) == n and len(_csv_rows(trial)) == n + 1
        except (FileNotFoundError, json.JSONDecodeError):  # created, not yet written
            return False

    while not there():
        assert time.monotonic() < deadline, f"{n} rows not written in {timeout_s} s"
        time.sleep(0.01)


def _loggers() -> list[JsonLoggerCallback | CSVLoggerCallback]:
    """The loggers as a tuning loop holds them: ``setup()`` called, so their writes go to
    the writer thread until ``on_experiment_end``."""
    loggers = [JsonLoggerCallback(), CSVLoggerCallback()]
    for cb in loggers:
        cb.setup(stop=None, num_samples=1, total_num_samples=1)
    return loggers


def test_hooks_called_outside_a_tuning_loop_write_before_they_return(tmp_path):
    """Ray's own logger tests call the hooks by hand and read the files at once: with no
    ``setup()`` (no tuning loop) each row is on disk when its hook returns, even while the
    writer thread is busy with another experiment's files."""
    release = threading.Event()
    _WRITER.submit(release, release.wait, 30)
    _WRITER.kick()  # the writer thread is now stuck until the end of this test
    try:
        trial = _Trial("t0", str(tmp_path / "trial_0"), {"lr": 0.1})
        loggers = [JsonLoggerCallback(), CSVLoggerCallback()]
        for cb in loggers:
            cb.on_trial_start(0, [trial], trial)
        with open(os.path.join(trial.path, "params.json")) as f:
            assert json.load(f) == {"lr": 0.1}
        for cb in loggers:
            cb.on_trial_result(0, [trial], trial, {"loss": 1, "nest": {"a": 2}})
        assert _json_rows(trial) == [{"loss": 1, "nest": {"a": 2}}]
        assert _csv_rows(trial) == [["loss", "nest/a"], ["1", "2"]]
        for cb in loggers:
            cb.on_trial_result(1, [trial], trial, {"loss": 3, "nest": {"a": 4}})
            cb.on_trial_complete(1, [trial], trial)
        assert [r["loss"] for r in _json_rows(trial)] == [1, 3]
        assert _csv_rows(trial)[1:] == [["1", "2"], ["3", "4"]]
    finally:
        release.set()
        _WRITER.wait()


def test_rows_of_a_finished_step_are_on_disk_while_the_trial_runs(tmp_path):
    trial = _Trial("t0", str(tmp_path / "exp" / "trial_0"), {"lr": 0.1})
    loggers = _loggers()
    for cb in loggers:
        cb.on_trial_start(0, [trial], trial)  # the trial's folder does not exist yet
    for i in range(3):
        for cb in loggers:
            cb.on_trial_result(i, [trial], trial, {"loss": i, "nest": {"a": i}})
    for cb in loggers:
        cb.on_step_end(0, [trial])
    _rows_there(trial, 3)  # written by the writer thread, the trial still running
    assert [r["loss"] for r in _json_rows(trial)] == [0, 1, 2]
    assert _csv_rows(trial) == [["loss", "nest/a"], ["0", "0"], ["1", "1"], ["2", "2"]]
    with open(os.path.join(trial.path, "params.json")) as f:
        assert f.read() == json.dumps({"lr": 0.1}, indent=2, sort_keys=True)
    with open(os.path.join(trial.path, "params.pkl"), "rb") as f:
        assert pickle.load(f) == {"lr": 0.1}


def test_every_row_is_written_at_a_checkpoint_at_the_end_and_when_the_experiment_ends(
        tmp_path):
    a, b, c = (_Trial(f"t{i}", str(tmp_path / f"trial_{i}")) for i in range(3))
    loggers = _loggers()
    for t in (a, b, c):
        for cb in loggers:
            cb.on_trial_result(0, [a, b, c], t, {"loss": 1.0, "big": "x" * 100_000})
    for cb in loggers:  # no step end in between: a checkpoint writes what it covers
        cb.on_trial_save(0, [a, b, c], a)
    assert len(_json_rows(a)) == 1 and len(_csv_rows(a)) == 2  # on disk when it returns
    for cb in loggers:
        cb.on_trial_complete(0, [a, b, c], b)
    _rows_there(b, 1)
    assert _json_rows(b)[0]["big"] == "x" * 100_000  # a row past any buffer, whole
    for cb in loggers:
        cb.on_experiment_end([a, b, c])  # e.g. interrupted: c never ended
    assert len(_json_rows(c)) == 1 and _csv_rows(c)[1] == ["1.0", "x" * 100_000]


def test_a_file_that_cannot_be_written_fails_the_experiments_end(tmp_path):
    """As when Ray's logger cannot open a file: the error reaches the caller (here at the
    experiment's end, where the writer is drained), naming the file."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the trial's folder should be")
    trial = _Trial("t0", str(blocked / "trial_0"))
    cb = CSVLoggerCallback()
    cb.setup(stop=None, num_samples=1, total_num_samples=1)
    cb.on_trial_result(0, [trial], trial, {"loss": 1})
    cb.on_trial_complete(0, [trial], trial)
    with pytest.raises(OSError, match="blocked"):
        cb.on_experiment_end([trial])
    by_hand = CSVLoggerCallback()  # outside a tuning loop: raised by the hook that wrote
    with pytest.raises(OSError, match="blocked"):
        by_hand.on_trial_result(0, [trial], trial, {"loss": 1})


def test_a_write_error_fails_only_the_experiment_whose_file_it_was(tmp_path):
    """Two experiments in one process (e.g. two Tuners on threads) share the writer thread:
    one whose folder cannot be written fails at its end; the other ends cleanly, every row
    written, before or after it."""
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the trial's folder should be")
    bad, good = _Trial("t0", str(blocked / "trial_0")), _Trial("t1", str(tmp_path / "trial_1"))
    bad_loggers, good_loggers = _loggers(), _loggers()
    for loggers, trial in ((bad_loggers, bad), (good_loggers, good)):
        for cb in loggers:
            cb.on_trial_result(0, [trial], trial, {"loss": 1})
            cb.on_trial_complete(0, [trial], trial)
    for cb in good_loggers:  # drained after the bad one's writes failed: not its error
        cb.on_experiment_end([good])
    assert len(_json_rows(good)) == 1 and len(_csv_rows(good)) == 2
    for cb in bad_loggers:
        with pytest.raises(OSError, match="blocked"):
            cb.on_experiment_end([bad])


def test_a_trial_started_again_appends_without_a_second_header(tmp_path):
    trial = _Trial("t0", str(tmp_path / "trial_0"))
    for run, losses in enumerate(([1, 2], [3])):
        loggers = _loggers()  # as after Tuner.restore: new callbacks, the same folder
        for cb in loggers:
            cb.on_trial_start(0, [trial], trial)
            for loss in losses:
                cb.on_trial_result(run, [trial], trial, {"loss": loss, "it": run})
            cb.on_trial_complete(0, [trial], trial)
            cb.on_experiment_end([trial])
    assert [r["loss"] for r in _json_rows(trial)] == [1, 2, 3]
    assert _csv_rows(trial) == [["loss", "it"], ["1", "0"], ["2", "0"], ["3", "1"]]


def test_params_pkl_holds_the_bytes_cloudpickle_writes(tmp_path):
    """A plain config is pickled without cloudpickle's Pickler: the same bytes, so a
    reader (Ray's ``ExperimentAnalysis``, ``pickle.load``) sees no difference."""
    import cloudpickle
    import numpy as np

    shared = [1, 2]
    configs = [{"lr": 0.1, "layers": [64, (32, "relu")], "opt": {"name": "adam", "b": None},
                "nan": float("nan"), "big": 10**30, "a": shared, "b": shared},
               {"x": np.float32(1.5), "f": len}]  # not plain: cloudpickle itself
    for i, config in enumerate(configs):
        trial = _Trial(f"t{i}", str(tmp_path / f"trial_{i}"), config)
        cb = JsonLoggerCallback()
        cb.on_trial_start(0, [trial], trial)
        cb.on_experiment_end([trial])
        with open(os.path.join(trial.path, "params.pkl"), "rb") as f:
            assert f.read() == cloudpickle.dumps(config)
