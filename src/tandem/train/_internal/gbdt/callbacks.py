"""What the XGBoost and LightGBM report callbacks share: which metrics, how the workers'
metrics combine into one value, the checkpoint's files, and the order of the ranks' reports
on a checkpoint round."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def combine_metrics(per_rank: list[tuple[dict[str, float], dict[str, int]]]) -> dict[str, float]:
    """Workers' metrics (each on its own rows) as one value per key: the row-weighted mean
    (root-mean-square for rmse). Exact for mean-type metrics (logloss, error, l1, l2)."""
    import math

    out: dict[str, float] = {}
    for key in per_rank[0][0]:
        data, _, metric = key.partition("-")
        num = den = 0.0
        root = metric in ("rmse", "l2_root", "root_mean_squared_error")
        for metrics, rows in per_rank:
            if key not in metrics:
                continue
            w = float(rows.get(data, 1))
            v = float(metrics[key])
            num += w * (v * v if root else v)
            den += w
        if den:
            out[key] = math.sqrt(num / den) if root else num / den
    return out


def select_metrics(flat: dict[str, float],
                   metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """All of ``flat``, or only the asked-for keys (a dict renames ``{reported: library
    key}``)."""
    if metrics is None:
        return flat
    wanted = {metrics: metrics} if isinstance(metrics, str) else (
        dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics})
    return {out: flat[key] for out, key in wanted.items() if key in flat}


class ReportCallbackBase:
    """The part of ``RayTrainReportCallback`` that does not depend on the library: which
    metrics, the checkpoint's files, and the order of the ranks' reports on a checkpoint
    round. A library's callback says how a booster is saved and loaded and when a round
    ends.

    Args:
        metrics: which metrics to report (a key, a list, or ``{name: library key}``); all
            by default.
        filename: the booster's file name in the checkpoint.
        frequency: checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: checkpoint after the last round.
        results_postprocessing_fn: maps the metrics dict before it is reported.
        extra_files: more files (name -> bytes) written into every checkpoint.
    """

    CHECKPOINT_NAME = "model"
    library = "?"

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str | None = None,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Any = None,
        extra_files: Mapping[str, bytes] | None = None,
    ) -> None:
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(f"frequency={frequency!r}: give a whole number of rounds >= 0.")
        self._metrics = metrics
        self._filename = filename or self.CHECKPOINT_NAME
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._post = results_postprocessing_fn
        self._extra = dict(extra_files or {})

    # -- a library's part ------------------------------------------------------------------
    @classmethod
    def load_booster(cls, path: str) -> object:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    @classmethod
    def get_model(cls, checkpoint: Any, filename: str | None = None) -> Any:
        """The booster saved in ``checkpoint`` by this callback."""
        filename = filename or cls.CHECKPOINT_NAME
        with checkpoint.as_directory() as d:
            path = os.path.join(d, filename)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{checkpoint!r} holds no {filename!r} (it has "
                    f"{sorted(os.listdir(d))}); was it written by the {cls.library} report "
                    f"callback? Pass filename= if it was saved under another name."
                )
            return cls.load_booster(path)

    def _report_metrics(self, flat: dict[str, float]) -> dict[str, float]:
        metrics = select_metrics(flat, self._metrics)
        return self._post(metrics) if self._post is not None else metrics

    def _due(self, iteration: int) -> bool:
        """A checkpoint is due after round ``iteration`` (counted from 1)."""
        return bool(self._frequency) and iteration % self._frequency == 0

    @staticmethod
    def _rank() -> int:
        from tandem.train.session import get_context

        return get_context().world_rank

    def _save(self, booster: Any) -> str | None:
        """Rank 0 writes the booster (the same on every rank) and the extra files into a
        temporary folder; the other ranks write nothing."""
        if self._rank() != 0:
            return None
        import tempfile

        d = tempfile.mkdtemp(prefix=f"tandem-{self.library.lower()}-")
        booster.save_model(os.path.join(d, self._filename))
        for name, blob in self._extra.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
        return d

    def _deliver(self, metrics: dict[str, float], checkpoint_round: bool, ckpt_dir: str | None,
                 barrier: Any) -> None:
        """Reports one round. On a checkpoint round of a gang, the other ranks report before
        rank 0 does (``barrier`` in between), so that the checkpoint is complete
        (committable) when rank 0's report arrives, even if the run is stopped right after
        it (a tuner's scheduler at max_t)."""
        import shutil

        from tandem.train.api.checkpoint import Checkpoint
        from tandem.train.session import report

        try:
            if checkpoint_round and barrier is not None:
                rank = self._rank()
                if rank != 0:
                    report(metrics)
                barrier()
                if rank != 0:
                    return
            report(metrics, checkpoint=Checkpoint.from_directory(ckpt_dir)
                         if ckpt_dir else None)
        finally:
            if ckpt_dir:
                shutil.rmtree(ckpt_dir, ignore_errors=True)
