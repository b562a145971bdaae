"""``ray.tune.result``'s path: the names of the result keys tandem writes, with Ray's values.

tandem adds ``training_iteration`` and ``time_total_s`` to every reported row, and
``trial_id`` to every trial's row; a row with ``done=True`` ends its trial.
"""

from __future__ import annotations

DONE = "done"
TIME_TOTAL_S = "time_total_s"
TRAINING_ITERATION = "training_iteration"
TRIAL_ID = "trial_id"

__all__ = ["DONE", "TIME_TOTAL_S", "TRAINING_ITERATION", "TRIAL_ID"]
