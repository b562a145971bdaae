"""Ray's ``TUNE_GLOBAL_CHECKPOINT_S``: the seconds between two writes of
``experiment_state.json`` while an experiment runs (always written at its end)."""

from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.tune.controller import STATE_PERIOD_ENV, state_period_from_env


@pytest.mark.parametrize("raw, period", [(None, None), ("auto", None), (" AUTO ", None),
                                         ("", None), ("60", 60.0), ("0.5", 0.5), ("0", 0.0)])
def test_the_period_read_as_ray_reads_it(monkeypatch, raw, period):
    if raw is None:
        monkeypatch.delenv(STATE_PERIOD_ENV, raising=False)
    else:
        monkeypatch.setenv(STATE_PERIOD_ENV, raw)
    assert state_period_from_env() == period


@pytest.mark.parametrize("raw", ["soon", "-1", "nan", "inf"])
def test_a_bad_period_says_what_was_given_and_what_is_allowed(monkeypatch, raw):
    monkeypatch.setenv(STATE_PERIOD_ENV, raw)
    with pytest.raises(ConfigError, match=rf"TUNE_GLOBAL_CHECKPOINT_S='{raw}'.*'auto'"):
        state_period_from_env()
