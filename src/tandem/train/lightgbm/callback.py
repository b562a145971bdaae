"""``RayTrainReportCallback`` for ``lightgbm.train``: one report per boosting round, the
booster checkpointed every ``frequency`` rounds and after the last one."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import lightgbm

from tandem.train.api.checkpoint import Checkpoint


def flat_metrics(results: list[tuple[Any, ...]],
                 metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """LightGBM's ``[(data, metric, value, higher_better), ...]`` as
    ``{"valid-binary_error": value}``, or only the asked-for keys."""
    flat = {f"{r[0]}-{r[1]}": float(r[2]) for r in results}
    if metrics is None:
        return flat
    wanted = {metrics: metrics} if isinstance(metrics, str) else (
        dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics})
    return {out: flat[key] for out, key in wanted.items() if key in flat}


class RayTrainReportCallback:
    """Reports ``<eval set>-<metric>`` (e.g. ``valid-binary_error``) once per round to
    tandem from every worker (rank 0's are the run's metrics), and saves the booster as a
    checkpoint every ``frequency`` rounds and after the last round.

    Args:
        metrics: which metrics to report (a key, a list, or ``{name: lightgbm key}``).
        filename: the booster's file name in the checkpoint.
        frequency: checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: checkpoint after the last round.
        results_postprocessing_fn: maps the metrics dict before it is reported.
        extra_files: more files (name -> bytes) written into every checkpoint.
    """

    CHECKPOINT_NAME = "model.txt"
    order = 25  # after LightGBM's own logging / evaluation recording callbacks

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str = CHECKPOINT_NAME,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Callable[[dict[str, float]], dict[str, float]] | None = None,
        extra_files: Mapping[str, bytes] | None = None,
    ) -> None:
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(f"frequency={frequency!r}: give a whole number of rounds >= 0.")
        self._metrics = metrics
        self._filename = filename
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._post = results_postprocessing_fn
        self._extra = dict(extra_files or {})

    @staticmethod
    def get_model(checkpoint: Checkpoint, filename: str = CHECKPOINT_NAME) -> lightgbm.Booster:
        """The booster saved in ``checkpoint`` by this callback."""
        with checkpoint.as_directory() as d:
            path = os.path.join(d, filename)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{checkpoint!r} holds no {filename!r} (it has "
                    f"{sorted(os.listdir(d))}); was it written by the LightGBM report "
                    f"callback? Pass filename= if it was saved under another name."
                )
            return lightgbm.Booster(model_file=path)

    def __call__(self, env: Any) -> None:
        from tandem import train
        from tandem.train._internal.gbdt import combine_metrics
        from tandem.train.lightgbm.trainer import gang_link

        metrics = flat_metrics(env.evaluation_result_list or [], self._metrics)
        link = gang_link()
        if link is not None:  # LightGBM evaluates each worker's rows: combine them
            metrics = combine_metrics(
                [(m, dict(r)) for m, r in link.allgather([metrics, _rows(env.model)])])
        if self._post is not None:
            metrics = self._post(metrics)
        it = env.iteration + 1
        due = (bool(self._frequency) and it % self._frequency == 0) or (
            self._checkpoint_at_end and it == env.end_iteration)
        ckpt_dir = None
        rank = train.get_context().world_rank
        if due and rank == 0:
            ckpt_dir = tempfile.mkdtemp(prefix="tandem-lgbm-")
            env.model.save_model(os.path.join(ckpt_dir, self._filename))
            _write_files(ckpt_dir, self._extra)
        try:
            if due and link is not None:
                # the other ranks report a checkpoint round before rank 0 does, so that the
                # checkpoint is complete (committable) when rank 0's report arrives, even if
                # the run is stopped right after it (a tuner's scheduler at max_t)
                if rank != 0:
                    train.report(metrics)
                link.allgather(None)
                if rank != 0:
                    return
            train.report(metrics, checkpoint=Checkpoint.from_directory(ckpt_dir)
                         if ckpt_dir else None)
        finally:
            if ckpt_dir:
                shutil.rmtree(ckpt_dir, ignore_errors=True)


def _rows(booster: Any) -> dict[str, int]:
    """Rows of each data set the booster evaluates, by its name."""
    rows: dict[str, int] = {}
    train_set = getattr(booster, "train_set", None)
    if train_set is not None:
        rows[getattr(booster, "_train_data_name", "training")] = int(train_set.num_data())
    for name, ds in zip(getattr(booster, "name_valid_sets", []),
                        getattr(booster, "valid_sets", [])):
        rows[name] = int(ds.num_data())
    return rows


def _write_files(directory: str, files: Mapping[str, bytes]) -> None:
    for name, blob in files.items():
        with open(os.path.join(directory, name), "wb") as f:
            f.write(blob)


ReportCallback = RayTrainReportCallback
