"""PyTorch Lightning callbacks that report to Tune from inside a trial (Ray's
``ray.tune.integration.pytorch_lightning``): ``TuneReportCheckpointCallback`` and the
deprecated ``TuneReportCallback``. Needs ``pip install 'tandem-ml[lightning]'``."""

from __future__ import annotations

import inspect
import logging
import os
import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tandem.train.api.checkpoint import Checkpoint
from tandem.tune import session as tune_session

try:
    from lightning.pytorch import Callback, LightningModule, Trainer
except ModuleNotFoundError:
    from pytorch_lightning import (  # type: ignore[assignment]
        Callback,
        LightningModule,
        Trainer,
    )

logger = logging.getLogger(__name__)

# Every Lightning Callback hook of the installed version.
_allowed_hooks = {
    name
    for name, fn in inspect.getmembers(Callback, predicate=inspect.isfunction)
    if name.startswith("on_")
}

_warned_deprecated = False


def _override_ptl_hooks(callback_cls: type[TuneCallback]) -> type[TuneCallback]:
    """Makes every Lightning hook of ``callback_cls`` call ``_handle`` when it is one of the
    hooks the callback was asked to act ``on``."""

    def generate_overridden_hook(fn_name: str) -> Callable[..., None]:
        def overridden_hook(self: TuneCallback, trainer: Trainer, *args: object,
                            pl_module: LightningModule | None = None, **kwargs: object) -> None:
            if fn_name in self._on:
                self._handle(trainer=trainer, pl_module=pl_module)

        return overridden_hook

    for fn_name in _allowed_hooks:
        setattr(callback_cls, fn_name, generate_overridden_hook(fn_name))
    return callback_cls


class TuneCallback(Callback):
    """Base class for Tune's PyTorch Lightning callbacks.

    Args:
        on: When to act: one or more Lightning hook names without ``on_`` (e.g.
            ``"train_batch_start"``, ``"train_end"``). Defaults to ``"validation_end"``.

    Raises:
        ValueError: a name that is not a Lightning hook.
    """

    def __init__(self, on: str | list[str] = "validation_end") -> None:
        if not isinstance(on, list):
            on = [on]
        for hook in on:
            if f"on_{hook}" not in _allowed_hooks:
                raise ValueError(
                    f"Invalid hook selected: {hook}. Must be one of "
                    f"{_allowed_hooks}"
                )
        self._on = [f"on_{hook}" for hook in on]

    def _handle(self, trainer: Trainer, pl_module: LightningModule | None) -> None:
        raise NotImplementedError


_override_ptl_hooks(TuneCallback)


class TuneReportCheckpointCallback(TuneCallback):
    """Reports Lightning's metrics to Tune, with a checkpoint, at the chosen hook.

    Args:
        metrics: Metrics to report: a key of ``trainer.callback_metrics``, a list of keys
            (reported under the same names) or ``{reported name: Lightning key}``; all
            of ``trainer.callback_metrics`` by default.
        filename: The Lightning checkpoint's file name in the checkpoint folder.
        save_checkpoints: Report a checkpoint with the metrics (default True); False
            reports only metrics.
        on: When to report: one or more Lightning hook names without ``on_``.
            Defaults to ``"validation_end"``.

    Example::

        trainer = pl.Trainer(callbacks=[TuneReportCheckpointCallback(
            metrics={"loss": "val_loss", "mean_accuracy": "val_acc"},
            filename="trainer.ckpt", on="validation_end")])
    """

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str = "checkpoint",
        save_checkpoints: bool = True,
        on: str | list[str] = "validation_end",
    ) -> None:
        super().__init__(on=on)
        if isinstance(metrics, str):
            metrics = [metrics]
        self._save_checkpoints = save_checkpoints
        self._filename = filename
        self._metrics = metrics

    def _get_report_dict(self, trainer: Trainer,
                         pl_module: LightningModule | None) -> dict[str, Any] | None:
        if trainer.sanity_checking:  # not during the initial validation sanity check
            return None
        if not self._metrics:
            return {k: v.item() for k, v in trainer.callback_metrics.items()}
        report_dict = {}
        for key in self._metrics:
            metric = self._metrics[key] if isinstance(self._metrics, dict) else key
            if metric in trainer.callback_metrics:
                report_dict[key] = trainer.callback_metrics[metric].item()
            else:
                logger.warning(f"Metric {metric} does not exist in `trainer.callback_metrics.")
        return report_dict

    @contextmanager
    def _get_checkpoint(self, trainer: Trainer) -> Iterator[Checkpoint | None]:
        if not self._save_checkpoints:
            yield None
            return
        with tempfile.TemporaryDirectory() as checkpoint_dir:
            trainer.save_checkpoint(os.path.join(checkpoint_dir, self._filename))
            yield Checkpoint.from_directory(checkpoint_dir)

    def _handle(self, trainer: Trainer, pl_module: LightningModule | None) -> None:
        if trainer.sanity_checking:
            return
        report_dict = self._get_report_dict(trainer, pl_module)
        if not report_dict:
            return
        with self._get_checkpoint(trainer) as checkpoint:
            tune_session.report(report_dict, checkpoint=checkpoint)


class _TuneCheckpointCallback(TuneCallback):
    def __init__(self, *args: object, **kwargs: object) -> None:
        raise DeprecationWarning(
            "`ray.tune.integration.pytorch_lightning._TuneCheckpointCallback` "
            "is deprecated."
        )


class TuneReportCallback(TuneReportCheckpointCallback):
    """Deprecated (as in Ray): ``TuneReportCheckpointCallback(save_checkpoints=False)``,
    with a warning."""

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        on: str | list[str] = "validation_end",
    ) -> None:
        global _warned_deprecated
        if not _warned_deprecated:
            _warned_deprecated = True
            warnings.warn(
                "`ray.tune.integration.pytorch_lightning.TuneReportCallback` "
                "is deprecated. Use "
                "`ray.tune.integration.pytorch_lightning.TuneReportCheckpointCallback`"
                " instead.",
                stacklevel=2,
            )
        super().__init__(metrics=metrics, save_checkpoints=False, on=on)


__all__ = ["TuneCallback", "TuneReportCallback", "TuneReportCheckpointCallback"]
