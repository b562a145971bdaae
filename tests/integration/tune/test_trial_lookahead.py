"""Issue 25, the 100 ms row: at ``max_concurrent_trials`` with the FIFO scheduler and the
basic variant generator, a slot's worker is handed its next trial while it runs one
(``STREAM_AHEAD``) and starts it the moment the one before ends, with no round trip to the
tuner between them. Only the timing may change: no more trials than the limit run at once,
each trial runs once with its own config and files, and an experiment stopped with trials
handed ahead resumes them."""

from __future__ import annotations

import json
import os
import time

import pytest

from tandem import tune

pytestmark = pytest.mark.timeout(180)


def _timed(config):
    """Sleeps ``config["s"]``; notes when it ran (its own file, in ``config["log"]``)."""
    start = time.time()
    time.sleep(config["s"])
    with open(os.path.join(config["log"], f"{config['i']}.json"), "w") as f:
        json.dump([start, time.time(), os.getpid()], f)
    tune.report({"i": config["i"]})


def _most_at_once(spans: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    live = most = 0
    for _, d in edges:  # an end sorts before a start at the same instant
        live += d
        most = max(most, live)
    return most


def _sweep(tmp_path, fn, n: int, name: str, stop=None, **space) -> tune.Tuner:
    """``n`` trials of ``fn``, 2 at a time (``max_concurrent_trials``); ``config["log"]``
    is ``tmp_path/log``."""
    log = tmp_path / "log"
    log.mkdir(exist_ok=True)
    return tune.Tuner(
        fn, param_space={"i": tune.grid_search(list(range(n))), "log": str(log), **space},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name=name, verbose=0, stop=stop),
    )


def test_slots_start_the_trial_handed_ahead_and_never_run_more_than_the_limit(tmp_path):
    n = 12
    log = tmp_path / "log"
    tuner = _sweep(tmp_path, _timed, n, "ahead", s=0.3)
    grid = tuner.fit()
    assert not grid.errors
    assert sorted(r.metrics["i"] for r in grid) == list(range(n))  # each once, its config
    for r in grid:
        with open(os.path.join(r.path, "params.json")) as f:
            assert json.load(f)["i"] == r.metrics["i"]
    runs = [json.loads((log / f"{i}.json").read_text()) for i in range(n)]
    assert _most_at_once([(s, e) for s, e, _ in runs]) <= 2  # max_concurrent_trials holds
    first_two = sorted(range(n), key=lambda i: runs[i][0])[:2]
    assert set(first_two) == {0, 1}  # nothing handed ahead before both slots had a trial
    assert len({pid for _, _, pid in runs}) <= 2  # two slot workers ran them all
    # each slot's first two trials come as answers to its questions (a worker is handed
    # trials ahead once it went on to a second trial); the rest were in its worker's hands
    # when the trial before ended (a 0.3 s trial leaves the tuner ample time), but for one
    # a slot on a loaded machine may have missed
    assert tuner._started_ahead >= n - 6, tuner._started_ahead


def test_trials_are_not_handed_ahead_where_the_order_or_the_configs_could_change(tmp_path):
    """No limit (slots follow the cluster's room), or a scheduler that picks which trial
    runs next, or a searcher that learns from results: trials go one round trip at a time."""
    log = tmp_path / "log"
    log.mkdir()
    space = {"i": tune.grid_search(list(range(4))), "s": 0.05, "log": str(log)}
    for name, tc in [
        ("unlimited", tune.TuneConfig()),
        ("asha", tune.TuneConfig(max_concurrent_trials=2, metric="i", mode="max",
                                 scheduler=tune.schedulers.ASHAScheduler())),
    ]:
        tuner = tune.Tuner(_timed, param_space=space, tune_config=tc,
                           run_config=tune.RunConfig(storage_path=str(tmp_path), name=name,
                                                     verbose=0))
        grid = tuner.fit()
        assert not grid.errors and len(grid) == 4
        assert tuner._slot_jobs >= 1 and tuner._started_ahead == 0, name


class _StopAllAfter(tune.Stopper):
    """Stops the experiment after ``n`` results, the first time only (the restored
    experiment brings the stopper back)."""

    def __init__(self, n: int, marker: str) -> None:
        self.n, self.seen, self.marker = n, 0, marker

    def __call__(self, trial_id, result):
        self.seen += 1
        return False

    def stop_all(self):
        if self.seen >= self.n and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            return True
        return False


def test_an_experiment_stopped_with_trials_handed_ahead_resumes_them(tmp_path):
    n = 12
    tuner = _sweep(tmp_path, _timed, n, "stopped", s=0.2,
                   stop=_StopAllAfter(6, str(tmp_path / "stopped_once")))
    first = tuner.fit()
    done_first = sorted(r.metrics["i"] for r in first if r.metrics.get("i") is not None)
    assert 6 <= len(done_first) < n
    assert tuner._started_ahead >= 1  # trials were handed ahead when it stopped

    grid = tune.Tuner.restore(str(tmp_path / "stopped"), _timed).fit()
    assert not grid.errors
    assert sorted(r.metrics["i"] for r in grid) == list(range(n))  # every trial ran to its end
    assert len(grid) == n


def _meets(config):
    """Notes that it runs; the first trial waits (up to 20 s) until another one runs too."""
    folder = config["log"]
    open(os.path.join(folder, f"running_{config['i']}"), "w").close()
    deadline = time.monotonic() + 20
    others = []
    while config["i"] == 0 and not others and time.monotonic() < deadline:
        others = [f for f in os.listdir(folder) if f != "running_0"]
        time.sleep(0.01)
    tune.report({"i": config["i"], "met": config["i"] != 0 or bool(others)})


def test_the_first_trials_run_together_though_one_was_handed_ahead(tmp_path):
    """A trial handed ahead does not take a place under the limit from a slot waiting for
    its first trial: the first slot's worker may be handed the second trial ahead before
    the second slot asks, and the second slot still gets one at once (it waited for the
    first slot's trial to end)."""
    grid = _sweep(tmp_path, _meets, 6, "together").fit()
    assert not grid.errors
    assert all(r.metrics["met"] for r in grid)


def _leaves_a_thread(config):
    """Leaves a thread running, as importing torch or using CUDA does: its worker process
    runs no other trial (``tandem.cluster.reuse``), so its slot's stream ends after it."""
    import threading

    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
    tune.report({"i": config["i"], "pid": os.getpid()})


class _StartOrder(tune.Callback):
    def __init__(self) -> None:
        self.started: list[int] = []

    def on_trial_start(self, iteration, trials, trial, **info):
        self.started.append(trial.config["i"])


def test_trials_whose_workers_end_after_them_are_not_handed_ahead(tmp_path):
    """A trial that leaves torch, a CUDA context or a thread behind ends its slot's stream
    (the next trial runs in a fresh process): nothing is handed ahead to its worker, which
    would only hand it back, and the trials start in the order they were made (they
    started 0, 1, 3, 2, 5, 4 when the first trial of every slot was handed ahead)."""
    order = _StartOrder()
    n = 6
    log = tmp_path / "log"
    log.mkdir()
    tuner = tune.Tuner(
        _leaves_a_thread, param_space={"i": tune.grid_search(list(range(n)))},
        tune_config=tune.TuneConfig(max_concurrent_trials=2),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="fresh", verbose=0,
                                  callbacks=[order]),
    )
    grid = tuner.fit()
    assert not grid.errors
    assert sorted(r.metrics["i"] for r in grid) == list(range(n))
    assert len({r.metrics["pid"] for r in grid}) == n  # a fresh process for each trial
    assert tuner._started_ahead == 0
    assert order.started == list(range(n))
