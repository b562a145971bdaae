"""Matplotlib plots of results: learning curves and best-so-far (``Result.plot``,
``ResultGrid.plot``). Built on ``matplotlib.figure.Figure`` (no pyplot state, no GUI
backend needed): save with ``path=`` or let a notebook show the returned figure."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

from tandem._core.extras import import_optional

BOOKKEEPING = ("training_iteration", "time_total_s", "time_this_iter_s", "timestamp",
               "epoch", "step", "iteration", "trial_id")
PREFERRED = ("loss", "val_loss", "valid_loss", "mean_loss", "accuracy", "val_accuracy", "score")


def _num(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(float(v))


def figure(nrows: int = 1, ncols: int = 1) -> Any:
    Figure = import_optional("matplotlib.figure", "plot", "Plotting results").Figure
    return Figure(figsize=(6.4 * ncols, 4.2 * nrows), layout="constrained")


def pick_metric(rows_list: Sequence[Sequence[dict[str, object]]], metric: str | None) -> str:
    """``metric`` if given and reported; else a loss/accuracy, else the first numeric key."""
    keys: dict[str, None] = {}
    for rows in rows_list:
        for r in rows:
            for k, v in r.items():
                if _num(v):
                    keys.setdefault(k, None)
    if metric is not None:
        if metric not in keys:
            raise ValueError(
                f"metric={metric!r} was never reported; the reported metrics are "
                f"{sorted(keys) or 'none'}. Pass one of them as plot(metric=...).")
        return metric
    for k in PREFERRED:
        if k in keys:
            return k
    for k in keys:
        if k not in BOOKKEEPING:
            return k
    raise ValueError("nothing to plot: no numeric metric was reported")


def curve(rows: Sequence[dict[str, Any]], metric: str, x: str) -> tuple[list[float], list[float]]:
    xs: list[float] = []
    ys: list[float] = []
    for i, r in enumerate(rows):
        if _num(r.get(metric)):
            xv = r.get(x)
            xs.append(float(cast(float, xv)) if _num(xv) else float(i + 1))
            ys.append(float(r[metric]))
    return xs, ys


def save(fig: Any, path: str | None) -> Any:
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig
