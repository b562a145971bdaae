"""A tuning program's first trial starts on what the zygote started early already imported
(issue 25: the first trial's start): the trial job's own preload asks the zygote for
nothing more, so no extra round of imports (and no new generation of warm workers) comes
between ``fit()`` and the first trial."""

from __future__ import annotations

import pytest

import tandem
from tandem import tune
from tandem.cluster import local
from tests.helpers.zygotes import zygotes


def _trial(config):
    from tandem import tune as t

    t.report({"x": 1})


@pytest.mark.slow
def test_the_first_trials_job_asks_the_early_zygote_to_import_nothing_more(storage,
                                                                           monkeypatch):
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    tandem.shutdown()
    sent: list[object] = []
    to_zygote = local._IOThread._to_zygote

    def spy(self, msg):
        sent.append(msg[0] if isinstance(msg, tuple) else msg)
        return to_zygote(self, msg)

    monkeypatch.setattr(local._IOThread, "_to_zygote", spy)
    try:
        tuner = tune.Tuner(_trial, param_space={"i": tune.grid_search([0, 1])},
                           run_config=tune.RunConfig(storage_path=storage, verbose=0))
        (early,) = zygotes()  # started by the Tuner, before fit()
        results = list(tuner.fit())
        assert [r.metrics["x"] for r in results] == [1, 1]
        assert "preload" not in sent, f"the cluster asked the early zygote for more: {sent}"
    finally:
        tandem.shutdown()
    early.wait(timeout=30)
