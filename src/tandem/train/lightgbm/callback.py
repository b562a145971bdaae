"""``RayTrainReportCallback`` for ``lightgbm.train``: one report per boosting round, the
booster checkpointed every ``frequency`` rounds and after the last one."""

from __future__ import annotations

from typing import Any

import lightgbm

from tandem.train._internal.gbdt import ReportCallbackBase, combine_metrics, select_metrics
from tandem.train.lightgbm._link import gang_link


def flat_metrics(results: list[tuple[Any, ...]],
                 metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """LightGBM's ``[(data, metric, value, higher_better), ...]`` as
    ``{"valid-binary_error": value}``, or only the asked-for keys."""
    return select_metrics({f"{r[0]}-{r[1]}": float(r[2]) for r in results}, metrics)


class RayTrainReportCallback(ReportCallbackBase):
    """Reports ``<eval set>-<metric>`` (e.g. ``valid-binary_error``) once per round to
    tandem from every worker (rank 0's are the run's metrics), and saves the booster as a
    checkpoint every ``frequency`` rounds and after the last round. With several workers
    each metric is combined over every worker's rows (LightGBM evaluates each worker's own).

    Takes ``metrics`` (a key, a list, or ``{name: lightgbm key}``), ``filename``
    (``model.txt``), ``frequency``, ``checkpoint_at_end``, ``results_postprocessing_fn`` and
    ``extra_files``, as its base class ``ReportCallbackBase`` describes them.
    """

    CHECKPOINT_NAME = "model.txt"
    library = "LightGBM"
    order = 25  # after LightGBM's own logging / evaluation recording callbacks

    @classmethod
    def load_booster(cls, path: str) -> lightgbm.Booster:
        return lightgbm.Booster(model_file=path)

    def __call__(self, env: Any) -> None:
        flat = flat_metrics(env.evaluation_result_list or [], None)
        link = gang_link()
        if link is not None:  # LightGBM evaluates each worker's rows: combine them
            flat = combine_metrics([(m, dict(r)) for m, r in link.allgather([flat, _rows(env.model)])])
        metrics = self._report_metrics(flat)
        it = env.iteration + 1
        due = self._due(it) or (self._checkpoint_at_end and it == env.end_iteration)
        ckpt_dir = self._save(env.model) if due else None
        self._deliver(metrics, due, ckpt_dir,
                      (lambda: link.allgather(None)) if link is not None else None)


def _rows(booster: object) -> dict[str, int]:
    """Rows of each data set the booster evaluates, by its name."""
    rows: dict[str, int] = {}
    train_set = getattr(booster, "train_set", None)
    if train_set is not None:
        rows[getattr(booster, "_train_data_name", "training")] = int(train_set.num_data())
    for name, ds in zip(getattr(booster, "name_valid_sets", []),
                        getattr(booster, "valid_sets", [])):
        rows[name] = int(ds.num_data())
    return rows


ReportCallback = RayTrainReportCallback
