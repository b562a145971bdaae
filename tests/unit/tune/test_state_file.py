"""experiment_state.json: an ended trial's entry is encoded once and reused, and the file's
text is exactly what encoding the whole state at once gives."""

from __future__ import annotations

import json
from types import SimpleNamespace

from tandem.train.api.checkpoint import Checkpoint
from tandem.tune.controller import TuneController, _spliced, _trial_state
from tandem.tune.trial import TrialStatus, TuneTrial


def _trial(i: int, status: TrialStatus) -> TuneTrial:
    t = TuneTrial(f"abc_{i:05d}", {"lr": 0.1 * i, "nested": {"a": [1, 2]}}, name=f"t_{i}",
                  path=f"/tmp/exp/t_{i}", index=i, experiment_tag=str(i))
    t.status = status
    t.last_result = {"loss": 1.0 / (i + 1), "training_iteration": i, "obj": object}
    return t


def test_state_text_is_the_whole_encoding_and_ended_entries_follow_changes():
    trials = [_trial(i, s) for i, s in enumerate(
        [TrialStatus.TERMINATED, TrialStatus.ERROR, TrialStatus.RUNNING, TrialStatus.PENDING])]
    trials[1].error = ValueError("boom")
    view = SimpleNamespace(trials=trials, _state_json={})
    head = {"experiment_path": "/tmp/exp", "created": 4, "trials": []}

    def whole() -> str:
        return json.dumps({**head, "trials": [_trial_state(t) for t in trials]}, default=repr)

    def spliced() -> str:
        return _spliced(json.dumps(head, default=repr), TuneController._trials_json(view))

    assert spliced() == whole()
    assert sorted(view._state_json) == ["abc_00000", "abc_00001"]  # only ended trials kept
    assert json.loads(spliced())["trials"][1]["error"] == "ValueError: boom"
    # an ended trial that changes (a checkpoint found, restarted, a new last result) is
    # encoded again, not served stale
    trials[0].checkpoint = Checkpoint("/tmp/exp/t_0/checkpoint_000001")
    trials[1].status = TrialStatus.PENDING
    trials[3].status = TrialStatus.TERMINATED
    trials[3].last_result = {"loss": 0.0}
    assert spliced() == whole()
    state = json.loads(spliced())
    assert state["trials"][0]["checkpoint"] == "/tmp/exp/t_0/checkpoint_000001"
    assert state["trials"][1]["status"] == "PENDING"
    assert state["trials"][3]["last_result"] == {"loss": 0.0}
    assert _spliced('{"trials": []}', []) == '{"trials": []}'
