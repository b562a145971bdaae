"""The 1.x training callbacks and both spellings of ``train.report`` (no worker processes)."""

from __future__ import annotations

import json

import pytest

from tandem import train
from tandem.train import session as session_mod
from tandem.train.legacy.callbacks import JsonLoggerCallback, TBXLoggerCallback


class _RecordingSession:
    def __init__(self):
        self.reports = []

    def report(self, metrics, checkpoint, **options):  # validation=, upload=, ...
        self.reports.append((metrics, checkpoint))


@pytest.fixture
def recording():
    session = _RecordingSession()
    session_mod._set_session(session)
    yield session
    session_mod._set_session(None)


def test_report_takes_a_dict_or_keywords(recording):
    ckpt = train.Checkpoint("/tmp/x")
    train.report({"loss": 0.1})
    train.report(loss=0.2, epoch=1)
    train.report(loss=0.3, checkpoint=ckpt)
    train.report(checkpoint=5)  # 1.x: a metric that happens to be called "checkpoint"
    train.report()
    assert recording.reports == [({"loss": 0.1}, None), ({"loss": 0.2, "epoch": 1}, None),
                                 ({"loss": 0.3}, ckpt), ({"checkpoint": 5}, None), ({}, None)]
    with pytest.raises(TypeError, match="use one spelling"):
        train.report({"loss": 0.1}, epoch=2)


def test_json_logger_writes_a_list_per_report(tmp_path):
    cb = JsonLoggerCallback(workers_to_log=None)
    cb.start_training(logdir=str(tmp_path), config={})
    cb.process_results([{"a": 1}, {"a": 2}])
    cb.process_results([{"a": 3}, {"a": 4}])
    assert json.loads((tmp_path / "results.json").read_text()) == [
        [{"a": 1}, {"a": 2}], [{"a": 3}, {"a": 4}]]
    one = JsonLoggerCallback(logdir=str(tmp_path / "other"), filename="r.json", workers_to_log=1)
    one.start_training(logdir=str(tmp_path), config={})
    one.handle_result([{"a": 1}, {"a": 2}])
    assert json.loads((tmp_path / "other" / "r.json").read_text()) == [[{"a": 2}]]


def test_tbx_logger_writes_event_files(tmp_path):
    pytest.importorskip("tensorboardX")
    cb = TBXLoggerCallback()
    cb.start_training(logdir=str(tmp_path), config={})
    cb.handle_result([{"loss": 0.5, "nested": {"acc": 0.9}, "name": "x",
                       "_training_iteration": 1}])
    cb.finish_training()
    assert any(p.name.startswith("events.out.tfevents") for p in tmp_path.iterdir())
