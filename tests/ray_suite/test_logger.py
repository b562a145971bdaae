"""The logger callbacks, as Ray's python/ray/tune/tests/test_logger.py checks them
(``testCSV``, ``testJSON``: a mock trial with its own folder, results with nested dicts and
lists, the files read back), plus a trial started again appending to its files."""

from __future__ import annotations

import csv
import json
import os
import pickle

from tests.ray_suite.swap import target

logger = target("tune.logger")
result_names = target("tune.result")


class MockTrial:
    """What the loggers read of a trial (Ray's test builds a namedtuple the same way)."""

    def __init__(self, evaluated_params: dict, trial_id: str, logdir: str) -> None:
        self.evaluated_params = evaluated_params
        self.trial_id = trial_id
        self.logdir = logdir
        os.makedirs(logdir, exist_ok=True)  # Ray's test gives each trial an existing folder
        self.checkpoint = None
        self.storage = None

    @property
    def config(self) -> dict:
        return self.evaluated_params

    @property
    def local_path(self) -> str:
        return self.logdir

    def init_local_path(self) -> None:
        os.makedirs(self.logdir, exist_ok=True)

    def __hash__(self) -> int:
        return hash(self.trial_id)


def _result(t: float, rew: float, **kwargs) -> dict:
    out = dict(time_total_s=t, episode_reward_mean=rew, mean_accuracy=rew * 2,
               training_iteration=int(t))
    out.update(kwargs)
    return out


CONFIG = {"a": 2, "b": 5, "c": {"c": {"D": 123}, "e": None}}


def test_csv_logger(tmp_path):
    trial = MockTrial(CONFIG, "csv", str(tmp_path / "csv"))
    cb = logger.CSVLoggerCallback()
    cb.on_trial_start(iteration=0, trials=[], trial=trial)
    cb.on_trial_result(0, [], trial, _result(0, 4))
    cb.on_trial_result(1, [], trial, _result(1, 5))
    cb.on_trial_result(2, [], trial, _result(2, 6, score=[1, 2, 3], hello={"world": 1}))
    cb.on_trial_complete(3, [], trial)
    with open(os.path.join(trial.logdir, result_names.EXPR_PROGRESS_FILE)) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3
    assert [r["episode_reward_mean"] for r in rows] == ["4", "5", "6"]
    assert [r["training_iteration"] for r in rows] == ["0", "1", "2"]
    # the columns are the first result's: keys only later results have are dropped
    assert set(rows[0]) == {"time_total_s", "episode_reward_mean", "mean_accuracy",
                            "training_iteration"}

    # started again: appended, with no second header
    cb.on_trial_start(iteration=4, trials=[], trial=trial)
    cb.on_trial_result(4, [], trial, _result(3, 7))
    cb.on_trial_complete(5, [], trial)
    with open(os.path.join(trial.logdir, result_names.EXPR_PROGRESS_FILE)) as f:
        rows = list(csv.DictReader(f))
    assert [r["episode_reward_mean"] for r in rows] == ["4", "5", "6", "7"]


def test_csv_logger_flattens_nested_results(tmp_path):
    trial = MockTrial(CONFIG, "nested", str(tmp_path / "nested"))
    cb = logger.CSVLoggerCallback()
    cb.on_trial_result(0, [], trial, _result(1, 4, hello={"world": {"x": 1}}, config=CONFIG))
    cb.on_trial_complete(1, [], trial)
    with open(os.path.join(trial.logdir, result_names.EXPR_PROGRESS_FILE)) as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["hello/world/x"] == "1" and "config" not in rows[0]


def test_json_logger(tmp_path):
    trial = MockTrial(CONFIG, "json", str(tmp_path / "json"))
    cb = logger.JsonLoggerCallback()
    cb.on_trial_start(iteration=0, trials=[], trial=trial)
    cb.on_trial_result(0, [], trial, _result(0, 4))
    cb.on_trial_result(1, [], trial, _result(1, 5))
    cb.on_trial_result(2, [], trial, _result(2, 6, score=[1, 2, 3], hello={"world": 1}))
    cb.on_trial_complete(3, [], trial)
    with open(os.path.join(trial.logdir, result_names.EXPR_RESULT_FILE)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert [r["episode_reward_mean"] for r in rows] == [4, 5, 6]
    assert rows[2]["score"] == [1, 2, 3] and rows[2]["hello"] == {"world": 1}
    with open(os.path.join(trial.logdir, result_names.EXPR_PARAM_FILE)) as f:
        assert json.load(f) == CONFIG
    with open(os.path.join(trial.logdir, result_names.EXPR_PARAM_PICKLE_FILE), "rb") as f:
        assert pickle.load(f) == CONFIG

    cb.on_trial_start(iteration=4, trials=[], trial=trial)  # started again: appended
    cb.on_trial_result(4, [], trial, _result(3, 7))
    cb.on_trial_complete(5, [], trial)
    with open(os.path.join(trial.logdir, result_names.EXPR_RESULT_FILE)) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    assert [r["episode_reward_mean"] for r in rows] == [4, 5, 6, 7]
