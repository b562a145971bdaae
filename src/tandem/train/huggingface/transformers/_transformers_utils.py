"""Ray Train's ``transformers`` callback and ``prepare_trainer`` over tandem's worker
session (Ray 2.60's ``ray/train/huggingface/transformers/_transformers_utils.py``)."""

from __future__ import annotations

import logging
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

from tandem._core.extras import install_command
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.session import report

logger = logging.getLogger(__name__)

INSTALL_HINT = install_command("transformers")

TRANSFORMERS_IMPORT_ERROR: ImportError | None = None

try:
    import transformers.trainer
    from transformers.trainer_callback import TrainerCallback
except ImportError as e:
    TRANSFORMERS_IMPORT_ERROR = ImportError(
        f"transformers cannot be imported ({e}); install it with {INSTALL_HINT}."
    )
    TrainerCallback = object  # type: ignore[assignment,misc]


class RayTrainReportCallback(TrainerCallback):
    """Reports to tandem after every checkpoint the ``transformers.Trainer`` saves: the
    metrics of ``TrainerState.log_history`` (merged, latest last) and the checkpoint.

    Checkpoints are saved as::

        checkpoint_00000*/   tandem checkpoint
        └─ checkpoint/       Hugging Face Transformers checkpoint

    Configure logging, evaluation and saving so the metric you watch is up to date when the
    Trainer saves (e.g. ``eval_strategy == save_strategy == "epoch"``), as with Ray.
    """

    CHECKPOINT_NAME = "checkpoint"

    def __init__(self, *args: object, **kwargs: object) -> None:
        if TRANSFORMERS_IMPORT_ERROR is not None:
            raise TRANSFORMERS_IMPORT_ERROR
        super().__init__(*args, **kwargs)

    def on_save(self, args: Any, state: Any, control: object, **kwargs: object) -> None:
        """Called by the Trainer after it saved a checkpoint."""
        with TemporaryDirectory() as tmpdir:
            metrics: dict[str, Any] = {}
            for log in state.log_history:
                metrics.update(log)

            source_ckpt_path = transformers.trainer.get_last_checkpoint(args.output_dir)
            if source_ckpt_path is not None:
                target_ckpt_path = Path(tmpdir, self.CHECKPOINT_NAME).as_posix()
                shutil.copytree(source_ckpt_path, target_ckpt_path)
                checkpoint: Checkpoint | None = Checkpoint.from_directory(tmpdir)
            else:
                checkpoint = None

            report(metrics=metrics, checkpoint=checkpoint)


class RayTorchIterableDataset(IterableDataset):
    """A torch ``IterableDataset`` over a Ray Data iterable (``iter_torch_batches``)."""

    def __init__(self, data_iterable: Iterable[Any]) -> None:
        super().__init__()
        self.data_iterable = data_iterable

    def __iter__(self) -> Iterator[Any]:
        return iter(self.data_iterable)


def _ray_iterable_class() -> type | None:
    """Ray Data's iterable of batches (what ``DataIterator.iter_torch_batches`` returns),
    when Ray is installed."""
    try:
        from ray.data.iterator import _IterableFromIterator
    except ImportError:
        return None
    return _IterableFromIterator


def _first(batch: list[object]) -> object:
    return batch[0]


def prepare_trainer(trainer: object) -> Any:
    """Prepares a ``transformers.Trainer`` for tandem: when its ``train_dataset`` or
    ``eval_dataset`` is a Ray Data iterable (``train.get_dataset_shard("train")
    .iter_torch_batches(...)``), its data loaders read the batches as they come (Ray Data
    already batched and sharded them); other datasets are left to the Trainer."""
    if TRANSFORMERS_IMPORT_ERROR is not None:
        raise TRANSFORMERS_IMPORT_ERROR
    iterable_cls = _ray_iterable_class()

    def is_ray(data: object) -> bool:
        return iterable_cls is not None and isinstance(data, iterable_cls)

    base_trainer_class: type = trainer.__class__

    class RayTransformersTrainer(base_trainer_class):
        """A ``transformers.Trainer`` that reads Ray Data iterables as they are."""

        def get_train_dataloader(self) -> DataLoader:
            if is_ray(self.train_dataset):
                dataset = RayTorchIterableDataset(self.train_dataset)
                return DataLoader(dataset, batch_size=1, collate_fn=_first)
            return super().get_train_dataloader()

        def get_eval_dataloader(self, eval_dataset: Any = None) -> DataLoader:
            if eval_dataset is None:
                eval_dataset = self.eval_dataset

            if (
                isinstance(eval_dataset, str)
                and isinstance(self.eval_dataset, dict)
                and is_ray(self.eval_dataset[eval_dataset])
            ):
                dataset = RayTorchIterableDataset(self.eval_dataset[eval_dataset])
                return DataLoader(dataset, batch_size=1, collate_fn=_first)
            if is_ray(eval_dataset):
                dataset = RayTorchIterableDataset(eval_dataset)
                return DataLoader(dataset, batch_size=1, collate_fn=_first)
            return super().get_eval_dataloader(eval_dataset)

    trainer.__class__ = RayTransformersTrainer
    return trainer
