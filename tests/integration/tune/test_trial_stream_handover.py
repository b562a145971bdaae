"""Issue 25, trials per second and the gap between two trials of a slot: a slot job's
reports and its worker's questions (the next trial, a verdict) reach the tuner from the
thread that reads the worker's connection, in the order sent, not through the slot job's
controller thread (one thread hand-over less in the round trip between two trials).
Everything a trial gets stays the same: its results in order, its stop verdict at the same
iteration."""

from __future__ import annotations

import threading

import pytest

from tandem import tune
from tandem.train._internal import controller as controller_mod


def _steps(config):
    for i in range(config["n"]):
        tune.report({"i": config["i"], "step": i + 1})


def _sweep(tmp_path, name: str, n: int) -> tune.Tuner:
    """``n`` trials of 3 steps, 2 at a time, stopped at step 2 by the stop criteria (a
    verdict asked and answered at that report); every trial's rows in order, none beyond
    step 2."""
    tuner = tune.Tuner(
        _steps, param_space={"i": tune.grid_search(list(range(n))), "n": 3},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0,
                                  stop={"step": 2}),
    )
    results = list(tuner.fit())
    assert 1 <= tuner._slot_jobs <= 2
    assert sorted(r.metrics["i"] for r in results) == list(range(n))
    for r in results:
        assert r.error is None
        assert [row["step"] for row in r.metrics_dataframe.to_dict("records")] == [1, 2]
    return tuner


@pytest.mark.slow
def test_a_slots_trials_pass_no_frame_through_its_controller_thread(monkeypatch, tmp_path):
    handled: list[str] = []
    step = controller_mod.TrainController.step

    def counted(self, timeout_s=None):
        state = step(self, timeout_s)
        handled.append(self.spec.storage.run_name)
        return state

    monkeypatch.setattr(controller_mod.TrainController, "step", counted)
    tuner = _sweep(tmp_path, "handover", 40)
    # the slots' controller threads woke for their workers' start and end only: not for
    # the 40 trials' 80 reports and their 40 next-trial questions
    assert len(handled) <= 8 * tuner._slot_jobs, handled


@pytest.mark.slow
def test_a_slots_first_frames_before_its_gang_is_set_are_answered(monkeypatch, tmp_path):
    """A warm worker can report and ask for its next trial before ``start_workers`` has
    returned on the controller thread. Those frames wait in the controller's queue and are
    handled in order, and the ones after them too: none is dropped (the worker would wait
    for its answer for ever), none overtakes an earlier one."""
    from tandem.cluster.local import LocalCluster
    from tandem.train._internal.frames import CallFrame, decode_worker_frame

    start = LocalCluster.start_workers
    held_back: list[int] = []

    def late_start(self, placement, specs, tasks, sink):
        asked = threading.Event()

        def watching(worker, frame):
            sink(worker, frame)
            try:
                if isinstance(decode_worker_frame(frame), CallFrame):
                    asked.set()
            except ValueError:
                pass

        workers = start(self, placement, specs, tasks, watching)
        # return only once the worker has reported and asked (its first trial done)
        assert asked.wait(60), "the slot's worker asked nothing"
        held_back.append(len(workers))
        return workers

    monkeypatch.setattr(LocalCluster, "start_workers", late_start)
    _sweep(tmp_path, "early", 12)
    assert held_back  # every slot's start was held back until its worker had asked
