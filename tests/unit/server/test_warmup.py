"""A train server imports what its first job would (``tandem.server.warmup``)."""

from __future__ import annotations

import inspect
import logging
import sys

from tandem.server.warmup import DRIVER_MODULES, WORKER_MODULES, start_warmup


def test_the_zygote_is_warmed_with_what_train_and_tune_workers_preload():
    from tandem.train._internal import controller
    from tandem.tune import tuner

    assert set(controller._WORKER_PRELOAD) <= set(WORKER_MODULES)
    assert 'preload=("tandem.tune",)' in inspect.getsource(tuner)  # a trial's preload
    assert "tandem.tune" in WORKER_MODULES and "tandem.tune" in DRIVER_MODULES


def test_start_warmup_prewarms_imports_and_survives_a_module_that_fails(caplog):
    asked = []
    sys.modules.pop("colorsys", None)
    with caplog.at_level(logging.WARNING, logger="tandem.server.warmup"):
        thread = start_warmup(asked.append, ("colorsys", "tandem_no_such_module"))
        thread.join(30)
    assert not thread.is_alive()
    assert asked == [WORKER_MODULES]
    assert "colorsys" in sys.modules
    assert "could not import tandem_no_such_module" in caplog.text
    start_warmup(None, ()).join(30)  # a cluster without a launcher to warm
