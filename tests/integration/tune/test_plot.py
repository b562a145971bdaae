"""ResultGrid.plot / Result.plot: learning curves and best-so-far as PNG files."""

from __future__ import annotations

import json

import pytest

from tandem import tune
from tandem.tune.schedulers import ASHAScheduler

pytest.importorskip("matplotlib")


def trainable(config):
    for i in range(1, 9):
        tune.report({"loss": config["lr"] * (9 - i), "acc": i * config["lr"]})


def test_result_grid_and_result_plot_to_png(tmp_path):
    grid = tune.Tuner(
        trainable, param_space={"lr": tune.grid_search([0.1, 0.5, 0.9, 1.3])},
        tune_config=tune.TuneConfig(metric="loss", mode="min",
                                    scheduler=ASHAScheduler(max_t=8, grace_period=2)),
        run_config=tune.RunConfig(name="plots", storage_path=str(tmp_path), verbose=0),
    ).fit()
    state = json.loads((tmp_path / "plots" / "experiment_state.json").read_text())
    assert state["metric"] == "loss" and state["mode"] == "min"
    decided = [d for t in state["trials"] for d in t["decisions"]]
    assert decided and all(d["action"] in ("STOP", "PAUSE", "RESTART") for d in decided)

    png = tmp_path / "grid.png"
    fig = grid.plot(path=str(png))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    curves, best = fig.axes
    assert curves.get_ylabel() == "loss" and len(curves.get_lines()) >= 4
    assert any(line.get_label() == "scheduler decision" for line in curves.get_lines())
    _, ys = best.get_lines()[0].get_data()  # the best-so-far steps never get worse
    assert list(ys) == sorted(ys, reverse=True)

    one = tmp_path / "best.png"
    grid.get_best_result().plot("acc", path=str(one))
    assert one.stat().st_size > 5_000
    assert len(grid.plot(kind="best").axes) == 1
    with pytest.raises(ValueError, match="metric='nope' was never reported.*'acc'"):
        grid.plot(metric="nope")
    with pytest.raises(ValueError, match="kind='bars'"):
        grid.plot(kind="bars")
