"""The failure policy decides RETRY / RESCHEDULE / RAISE; the controller's states."""

from __future__ import annotations

import pytest

from tandem.jobs.spec import JobStatus
from tandem.train import FailureConfig
from tandem.train._internal.failure import FailureDecision, FailurePolicy, FailureStatus
from tandem.train._internal.state import TrainControllerState as S


def _decide(max_failures: int, num_failures: int, alive: bool = True) -> FailureDecision:
    policy = FailurePolicy(FailureConfig(max_failures=max_failures))
    return policy.make_decision(FailureStatus(num_failures, 1, "boom", placement_alive=alive))


@pytest.mark.parametrize("max_failures, num_failures, alive, decision", [
    (0, 1, True, FailureDecision.RAISE),
    (0, 1, False, FailureDecision.RAISE),      # node loss past the budget still raises
    (2, 1, True, FailureDecision.RETRY),
    (2, 2, True, FailureDecision.RETRY),
    (2, 3, True, FailureDecision.RAISE),
    (2, 2, False, FailureDecision.RESCHEDULE),  # a node of the placement is gone
    (-1, 1000, True, FailureDecision.RETRY),    # unlimited
    (-1, 1000, False, FailureDecision.RESCHEDULE),
])
def test_decisions(max_failures, num_failures, alive, decision):
    assert _decide(max_failures, num_failures, alive) is decision


def test_default_config_allows_no_restart():
    assert FailurePolicy(None).make_decision(FailureStatus(1, 0, "x")) is FailureDecision.RAISE


def test_terminal_states_and_what_the_user_sees():
    assert {s for s in S if s.is_terminal} == {S.FINISHED, S.ERRORED, S.STOPPED}
    assert {s for s in S if s.needs_new_gang} == {S.INITIALIZING, S.RESTARTING, S.RESCHEDULING,
                                                  S.PREEMPTED}
    assert S.FINISHED.job_status is JobStatus.FINISHED
    assert S.ERRORED.job_status is JobStatus.FAILED
    assert S.STOPPED.job_status is JobStatus.STOPPED
    assert S.RESCHEDULING.job_status is JobStatus.RESTARTING
    assert S.RUNNING.job_status is JobStatus.RUNNING
    assert S.PREEMPTING.job_status is JobStatus.RUNNING  # still running while it checkpoints
    assert S.PREEMPTED.job_status is JobStatus.RESTARTING


@pytest.mark.parametrize("max_preemptions, n, decision", [
    (-1, 1000, FailureDecision.RESCHEDULE),  # Ray's default: resume from every preemption
    (0, 1, FailureDecision.RAISE),
    (2, 2, FailureDecision.RESCHEDULE),
    (2, 3, FailureDecision.RAISE),
])
def test_preemptions_have_their_own_budget(max_preemptions, n, decision):
    config = FailureConfig(max_failures=0, max_preemption_failures=max_preemptions)
    policy = FailurePolicy(config)
    assert policy.make_preemption_decision(n) is decision
    # and they never spend max_failures: a first real failure still raises at max_failures=0
    assert policy.make_decision(FailureStatus(1, 0, "x")) is FailureDecision.RAISE


@pytest.mark.parametrize("kwargs, match", [
    ({"max_preemption_failures": -2}, "max_preemption_failures=-2"),
    ({"preemption_grace_s": -1}, "preemption_grace_s=-1"),
    ({"relax_collectives_on_preemption": "yes"}, "relax_collectives_on_preemption='yes'"),
])
def test_bad_preemption_settings_are_refused(kwargs, match):
    from tandem._core.errors import ConfigError

    with pytest.raises(ConfigError, match=match):
        FailureConfig(**kwargs)
