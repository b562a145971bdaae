"""Stopping a tuning run and resuming it, as Ray Tune does (python/ray/tune/tune.py,
``_setup_signal_catching``; tests/test_tune_restore.py's ``TuneInterruptionTest`` and
``TuneFailResumeGridTest``):

- the first Ctrl-C (SIGINT) or SIGUSR1 ends ``Tuner.fit()`` gracefully: trials stopped,
  the experiment state saved, the results so far returned, a warning that names
  ``Tuner.restore(path=...)``; a second Ctrl-C raises ``KeyboardInterrupt`` at once;
  ``TUNE_DISABLE_SIGINT_HANDLER=1`` leaves SIGINT alone;
- trials the experiment stopped (a stop signal, an error raised in the driver, fail_fast)
  are saved unfinished, so ``Tuner.restore(...).fit()`` runs them on (they were saved as
  TERMINATED and never resumed)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from tandem import tune
from tandem.tune.controller import _StopSignal

pytestmark = pytest.mark.timeout(240)


def _steps(config):
    """Four steps with a checkpoint each; resumes from its checkpoint."""
    step, resumed = 0, False
    checkpoint = tune.get_checkpoint()
    if checkpoint is not None:
        with checkpoint.as_directory() as d, open(os.path.join(d, "step.json")) as f:
            step, resumed = json.load(f), True
    while step < 4:
        step += 1
        if config.get("wait_for") and step == 2:
            while not os.path.exists(config["wait_for"]):
                time.sleep(0.02)
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "step.json"), "w") as f:
                json.dump(step, f)
            tune.report({"step": step, "resumed": resumed},
                        checkpoint=tune.Checkpoint.from_directory(d))


class _FailAfter(tune.Callback):
    """Ray's FailureInjectorCallback: the driver fails once ``n`` results came in, the first
    time only (``Tuner.restore`` brings the callback back, as Ray's does)."""

    def __init__(self, n: int, marker: str) -> None:
        self.n, self.seen, self.marker = n, 0, marker

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen += 1
        if self.seen == self.n and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            raise RuntimeError("the driver fails on purpose")


def test_trials_an_error_stopped_are_resumed_by_restore(tmp_path):
    """Ray's testFailResumeGridSearch: an error in the driver ends the experiment; restoring
    it runs every trial to its end, the stopped ones from their checkpoints."""
    with pytest.raises(RuntimeError, match="on purpose"):
        tune.Tuner(_steps, param_space={"i": tune.grid_search([0, 1, 2, 3])},
                   run_config=tune.RunConfig(storage_path=str(tmp_path), name="exp", verbose=0,
                                             callbacks=[_FailAfter(3, str(tmp_path / "failed"))])).fit()
    grid = tune.Tuner.restore(str(tmp_path / "exp"), _steps).fit()
    assert sorted(r.config["i"] for r in grid) == [0, 1, 2, 3]
    assert [r.metrics["step"] for r in grid] == [4, 4, 4, 4], [r.metrics for r in grid]
    assert grid.num_errors == 0
    assert any(r.metrics["resumed"] for r in grid)  # a stopped trial went on from its checkpoint


_DRIVER = textwrap.dedent("""
    import sys
    from tandem import tune
    from tests.integration.tune.test_interrupt import _steps

    grid = tune.Tuner(_steps, param_space={"i": tune.grid_search([0, 1, 2, 3]),
                                           "wait_for": sys.argv[2]},
                      run_config=tune.RunConfig(storage_path=sys.argv[1], name="exp",
                                                verbose=0)).fit()
    print("fit returned", len(grid), flush=True)
    """)


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGUSR1], ids=["SIGINT", "SIGUSR1"])
def test_a_stop_signal_ends_fit_gracefully_and_restore_finishes_the_run(tmp_path, signum):
    storage, gate = tmp_path / "runs", tmp_path / "gate"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))),
         *filter(None, [os.environ.get("PYTHONPATH")])])}
    proc = subprocess.Popen([sys.executable, "-c", _DRIVER, str(storage), str(gate)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        # two trials wait at their second step, with a checkpoint of their first
        deadline = time.monotonic() + 120
        while len(list(storage.glob("exp/*/checkpoint_*"))) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "no trial checkpointed"
            time.sleep(0.05)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert "fit returned 4" in out  # fit() returned the results so far, as Ray's
    assert "Experiment has been interrupted, but the most recent state was saved" in err
    assert f'Tuner.restore(path="{storage / "exp"}", trainable=...)' in err
    assert "Traceback" not in err

    gate.write_text("")  # the restored trials go past their second step
    grid = tune.Tuner.restore(str(storage / "exp"), _steps).fit()
    assert [r.metrics["step"] for r in grid] == [4, 4, 4, 4], [r.metrics for r in grid]
    assert sum(bool(r.metrics["resumed"]) for r in grid) >= 2


@pytest.fixture
def default_sigint():
    """SIGINT as a plain Python program has it (a test process may ignore it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_the_second_ctrl_c_interrupts_at_once(default_sigint):
    catcher = _StopSignal.install()
    assert catcher is not None
    try:
        os.kill(os.getpid(), signal.SIGINT)
        assert catcher.received  # the first: noted, nothing raised
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        catcher.uninstall()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert signal.getsignal(signal.SIGUSR1) is signal.SIG_DFL


def test_tune_disable_sigint_handler_leaves_ctrl_c_alone(default_sigint, monkeypatch):
    monkeypatch.setenv("TUNE_DISABLE_SIGINT_HANDLER", "1")
    catcher = _StopSignal.install()
    assert catcher is not None
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
        assert not catcher.received
        os.kill(os.getpid(), signal.SIGUSR1)  # still a graceful stop, as in Ray
        assert catcher.received
    finally:
        catcher.uninstall()


class _CtrlC(tune.Callback):
    """Presses Ctrl-C (SIGINT to this process) once, at the first result. Once only: both
    trials' first results can come in one step, and a second Ctrl-C interrupts at once
    (``KeyboardInterrupt``), as it should."""

    def __init__(self) -> None:
        self.pressed = False

    def on_trial_result(self, iteration, trials, trial, result, **info):
        if not self.pressed:
            self.pressed = True
            os.kill(os.getpid(), signal.SIGINT)


@pytest.mark.parametrize("entry", ["tune.run", "Tuner"])
def test_the_interrupted_warning_names_how_each_entry_point_continues(
        default_sigint, tmp_path, caplog, entry):
    """Ray's ``restore_entrypoint``: ``tune.run(..., resume=True)`` after ``tune.run``,
    ``Tuner.restore(path=..., trainable=...)`` after ``Tuner.fit``."""
    config = {"x": tune.grid_search([1, 2])}
    with caplog.at_level("WARNING", logger="tandem.tune"):
        if entry == "tune.run":
            tune.run(_steps, config=config, storage_path=str(tmp_path), name="exp",
                     callbacks=[_CtrlC()], verbose=0)
        else:
            tune.Tuner(_steps, param_space=config, run_config=tune.RunConfig(
                storage_path=str(tmp_path), name="exp", callbacks=[_CtrlC()],
                verbose=0)).fit()
    warned = [r.getMessage() for r in caplog.records if "interrupted" in r.getMessage()]
    assert len(warned) == 1, caplog.text
    expected = ("tune.run(..., resume=True)" if entry == "tune.run" else
                f'Tuner.restore(path="{tmp_path / "exp"}", trainable=...)')
    assert warned[0].endswith("Continue running this experiment with: " + expected)
