"""Ray's default logger callbacks (``JsonLoggerCallback``, ``CSVLoggerCallback``) write each
trial's ``result.json`` / ``params.json`` / ``params.pkl`` / ``progress.csv``: added by
``Tuner.fit()`` unless given or disabled, the only writers of those files, appending when a
trial starts again (``Tuner.restore``), as in Ray 2.60."""

from __future__ import annotations

import contextlib
import csv
import json
import os
import pickle
import tempfile

import pytest

import tandem
from tandem import tune
from tandem.train import Checkpoint, RunConfig
from tandem.tune.logger import JsonLoggerCallback

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(autouse=True)
def _cluster():
    tandem.init(num_cpus=2)
    yield


def nested_reports(config):
    for i in range(3):
        tune.report({"loss": config["x"] * i, "nest": {"a": i, "b": {"c": -i}}})


def _rows(path: str) -> list[dict]:
    with open(os.path.join(path, "result.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_default_and_explicit_loggers_write_rays_files_once(storage):
    """CSV logger added by default, the JSON one given explicitly: each file once, each row
    once, with Ray's content (flattened CSV columns, sorted params.json, params.pkl)."""
    given = JsonLoggerCallback()
    rg = tune.Tuner(
        nested_reports,
        param_space={"x": tune.grid_search([1, 2]), "z": {"b": 1, "a": [1, 2]}},
        run_config=RunConfig(storage_path=storage, name="exp", verbose=0, callbacks=[given]),
    ).fit()
    assert rg.num_errors == 0
    for r in rg:
        x = r.config["x"]
        rows = _rows(r.path)  # one writer: exactly one row per report
        assert [row["training_iteration"] for row in rows] == [1, 2, 3]
        assert [row["loss"] for row in rows] == [0, x, 2 * x]
        assert rows[2]["nest"] == {"a": 2, "b": {"c": -2}}
        assert {row["trial_id"] for row in rows} == {r.metrics["trial_id"]}
        with open(os.path.join(r.path, "progress.csv"), newline="") as f:
            table = list(csv.reader(f))
        header = table[0]
        assert header[:4] == ["loss", "training_iteration", "time_total_s", "trial_id"]
        assert header[4:] == ["nest/a", "nest/b/c"]  # Ray's flatten_dict: nested keys last
        assert len(table) == 4 and [t[0] for t in table[1:]] == [str(v) for v in (0, x, 2 * x)]
        assert [t[5] for t in table[1:]] == ["0", "-1", "-2"]
        with open(os.path.join(r.path, "params.json")) as f:
            text = f.read()
        assert json.loads(text) == {"x": x, "z": {"b": 1, "a": [1, 2]}}
        assert text == json.dumps({"x": x, "z": {"b": 1, "a": [1, 2]}}, indent=2, sort_keys=True)
        with open(os.path.join(r.path, "params.pkl"), "rb") as f:
            assert pickle.load(f) == r.config
        assert list(r.metrics_dataframe["loss"]) == [0, x, 2 * x]
    assert sorted(len(r.metrics_dataframe) for r in rg) == [3, 3]
    assert sorted(rg.get_dataframe()["loss"].tolist()) == [2, 4]


def test_disabled_by_env_var_writes_no_result_files(storage, monkeypatch):
    monkeypatch.setenv("TUNE_DISABLE_AUTO_CALLBACK_LOGGERS", "1")
    rg = tune.Tuner(
        nested_reports, param_space={"x": 3},
        run_config=RunConfig(storage_path=storage, name="off", verbose=0),
    ).fit()
    r = rg[0]
    assert r.error is None and r.metrics["loss"] == 6  # the run itself is unaffected
    for name in ("result.json", "progress.csv", "params.json", "params.pkl"):
        assert not os.path.exists(os.path.join(r.path, name)), name
    assert os.path.isdir(r.path)


def checkpoint_at_two_then_fail_once(config):
    ckpt = tune.get_checkpoint()
    start = 0
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "it")) as f:
            start = int(f.read())
    for it in range(start + 1, 5):
        with contextlib.ExitStack() as stack:  # the checkpoint's folder ends after the report
            checkpoint = None
            if it == 2:
                d = stack.enter_context(tempfile.TemporaryDirectory())
                with open(os.path.join(d, "it"), "w") as f:
                    f.write(str(it))
                checkpoint = Checkpoint.from_directory(d)
            tune.report({"it": it, "start": start}, checkpoint=checkpoint)
        marker = os.path.join(config["marker_dir"], "failed_once")
        if it == 3 and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError("fails once, after reporting iteration 3")


def test_restore_appends_to_the_trials_files(storage, tmp_path):
    """Ray's loggers open a restored trial's files for appending: the rows of the run
    before the restore stay, those reported again after the checkpoint follow them."""
    marker_dir = tmp_path / "m"
    marker_dir.mkdir()
    rg = tune.Tuner(
        checkpoint_at_two_then_fail_once, param_space={"marker_dir": str(marker_dir)},
        run_config=RunConfig(storage_path=storage, name="re", verbose=0),
    ).fit()
    assert rg.num_errors == 1
    path = rg[0].path
    assert [r["it"] for r in _rows(path)] == [1, 2, 3]

    rg = tune.Tuner.restore(os.path.join(storage, "re"), checkpoint_at_two_then_fail_once,
                            resume_errored=True).fit()
    assert rg.num_errors == 0 and rg[0].metrics["it"] == 4
    rows = _rows(path)
    assert [(r["it"], r["start"]) for r in rows] == [(1, 0), (2, 0), (3, 0), (3, 2), (4, 2)]
    with open(os.path.join(path, "progress.csv"), newline="") as f:
        table = list(csv.reader(f))
    assert table[0][:2] == ["it", "start"]  # one header: the restored trial appends
    assert [t[:2] for t in table[1:]] == [["1", "0"], ["2", "0"], ["3", "0"], ["3", "2"],
                                          ["4", "2"]]
