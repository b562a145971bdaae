"""Tuning entry points as a user runs them: ``Tuner`` over a function, a ``Trainable``
class and a Trainer; the TuneReportCallback pattern; the older ``tune.run``."""

from __future__ import annotations

import json
import os

import pytest

from tests.e2e.conftest import line

pytestmark = pytest.mark.timeout(180)


def test_tuner_over_a_function(user):
    out = user.python("tuner_function.py")
    assert line(out, "ERRORS") == "0" and line(out, "TRIALS") == "3"
    assert line(out, "BEST") == "0.3"
    assert line(out, "COLUMNS") == "True"
    exp = os.path.join(user.storage, "tuner_function")
    with open(os.path.join(exp, "experiment_state.json")) as f:
        assert len(json.load(f)["trials"]) == 3


def test_tuner_over_a_trainable_class(user):
    out = user.python("tuner_trainable_class.py")
    assert line(out, "ERRORS") == "0"
    assert line(out, "ITERATIONS") == "[4, 4, 4]"  # stop={"training_iteration": 4}
    assert line(out, "BEST") == "2 0.25"
    assert line(out, "CHECKPOINT_STEPS") == "4"  # the last checkpoint, from the trial's folder


def test_tuner_over_a_trainer(user):
    out = user.python("tuner_trainer.py")
    assert line(out, "ERRORS") == "0"
    assert line(out, "LOSSES") == "[0.1, 0.2]"
    assert line(out, "WORLDS") == "[2, 2]"  # scaling_config from param_space
    assert line(out, "IN_TRIAL") == "True" and line(out, "BEST_LR") == "0.1"


def test_trainer_inside_trials_with_tune_report_callback(user):
    out = user.python("tune_report_callback.py")
    assert line(out, "ERRORS") == "0"
    assert line(out, "LOSSES") == "[0.1, 0.2, 0.3]"
    assert line(out, "BEST_LR") == "0.1"
    assert line(out, "STANDALONE") == "0.5 None"  # the driver function runs outside Tune too


def test_tune_run(user):
    out = user.python("tune_run.py")
    assert line(out, "BEST_CONFIG") == "{'x': 1}"
    assert line(out, "BEST_LOSS") == "0.3333"
    assert line(out, "ROWS") == "3" and line(out, "TRIALS") == "3"
    assert line(out, "CLASS_BEST") == "{'k': 2} 6"
    assert os.path.isdir(os.path.join(user.storage, "tune_run_cls"))


def test_tuner_restore_in_a_new_process(user, tmp_path):
    marker = str(tmp_path / "second_run")
    first = user.python("tuner_restore.py", "first", marker)
    assert line(first, "FIRST") == "1 2"  # one trial failed, two finished
    again = user.python("tuner_restore.py", "restore", marker)
    assert line(again, "CAN_RESTORE") == "True"
    assert line(again, "RESTORED") == "0 3 [0, 1, 2]"
