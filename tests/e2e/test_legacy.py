"""The 1.x ``Trainer`` as its users run it: ``run``, ``run_iterator``, ``to_worker_group``
and ``to_tune_trainable`` under ``tune.run``."""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import line

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
def test_legacy_trainer_run_iterator_and_worker_group(user):
    out = user.python("legacy_trainer.py", user.home)
    assert line(out, "RUN") == "[0, 1]"  # each worker's return value
    assert line(out, "LATEST") == "1"
    assert line(out, "ITERATOR_EPOCHS") == "[2, 3]"  # resumed from the latest checkpoint
    assert line(out, "GROUP") == "2 [10, 11] [2, 2]"  # live workers with the backend set up
    runs = sorted(os.listdir(os.path.join(user.home, "legacy")))
    assert runs[:2] == ["run_001", "run_002"]


def test_legacy_trainer_to_tune_trainable_under_tune_run(user):
    out = user.python("legacy_to_tune.py")
    assert line(out, "BEST") == "{'lr': 0.1}"
    assert line(out, "LOSSES") == "[0.1, 0.2]"
