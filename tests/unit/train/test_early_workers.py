"""The worker side of a program starts early (issue 25, the cold start): looking up
``tune.Tuner`` or building a Tuner or a trainer starts the zygote, importing the worker code,
and the first fit() forks its workers from it; nothing starts when the jobs go elsewhere.

tests/conftest.py turns early starts off for the session (``TANDEM_TF_EARLY_IMPORT=0``, the older name of ``TANDEM_EARLY_IMPORT``); these tests turn it on.
"""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import train, tune
from tandem.cluster.local import early_zygote_modules
from tandem.train.early import WORKER_MODULES
from tandem.tune._early import TRIAL_MODULES
from tests.helpers.zygotes import zygotes

TRIAL_PRELOAD = (*WORKER_MODULES, *TRIAL_MODULES)


def _trial(config):
    import sys

    from tandem import tune as t

    t.report({"ppid": os.getppid(), "preloaded": all(m in sys.modules for m in config["mods"])})


@pytest.mark.slow
def test_a_tuner_starts_the_zygote_that_its_trial_forks_from(storage, monkeypatch):
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    tandem.shutdown()
    assert zygotes() == [] and early_zygote_modules() is None
    tuner = tune.Tuner(_trial, param_space={"mods": list(TRIAL_PRELOAD)},
                       run_config=tune.RunConfig(storage_path=storage, verbose=0))
    (early,) = zygotes()  # started by the Tuner, before fit()
    assert early_zygote_modules() == TRIAL_PRELOAD
    (result,) = list(tuner.fit())
    # the trial ran in a worker forked from that zygote, which had the worker code imported
    assert result.metrics["ppid"] == early.pid and result.metrics["preloaded"] is True
    # ... all of what a trial needs: its worker imported none of it after the fork (what it
    # learned is this test module's own imports, as the trial function lives here)
    from tandem.jobs import runtime

    learned = set(runtime.current_service().cluster._io_thread().learned)
    assert not learned & {"tandem.jobs.runtime", "tandem.jobs.service", "tandem.tune.trainable",
                          "tandem.train.backends.base", "tandem.train._internal.nested"}
    assert early_zygote_modules() is None  # adopted by the cluster
    # with a job service running, a new Tuner or trainer starts nothing
    tune.Tuner(_trial, param_space={"mods": []})
    train.DataParallelTrainer(lambda: None)
    assert [p.pid for p in zygotes()] == [early.pid]
    tandem.shutdown()
    early.wait(timeout=30)


def test_nothing_starts_early_when_jobs_go_elsewhere_or_it_is_off(monkeypatch):
    tandem.shutdown()
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    monkeypatch.setenv("TANDEM_ADDRESS", "127.0.0.1:1")  # a train server runs the jobs
    tune.Tuner(_trial)
    train.DataParallelTrainer(lambda: None)
    assert zygotes() == [] and early_zygote_modules() is None
    monkeypatch.delenv("TANDEM_ADDRESS")
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "0")
    tune.Tuner(_trial)
    assert zygotes() == [] and early_zygote_modules() is None
    # a trainer built in a program that will fit() it: started, and ended by shutdown
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    train.DataParallelTrainer(lambda: None)
    (unused,) = zygotes()
    assert early_zygote_modules() == WORKER_MODULES
    tandem.shutdown()
    unused.wait(timeout=30)
    assert early_zygote_modules() is None
