"""Ray Train's Lightning strategies, environment, callback and ``prepare_trainer``, over
tandem's worker session (Ray 2.60's ``ray/train/lightning/_lightning_utils.py``)."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch

from tandem.train.api.checkpoint import Checkpoint
from tandem.train.session import get_context, report
from tandem.train.torch.utils import get_device


def import_lightning() -> Any:
    try:
        import lightning.pytorch as pl
    except ModuleNotFoundError:
        import pytorch_lightning as pl  # type: ignore[no-redef]
    return pl


pl = import_lightning()

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.plugins.environments import LightningEnvironment
    from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy, FSDPStrategy
except ModuleNotFoundError:  # only the older package name is installed
    from pytorch_lightning.callbacks import Callback  # type: ignore[assignment]
    from pytorch_lightning.plugins.environments import (  # type: ignore[assignment]
        LightningEnvironment,
    )
    from pytorch_lightning.strategies import (  # type: ignore[assignment]
        DDPStrategy,
        DeepSpeedStrategy,
        FSDPStrategy,
    )

logger = logging.getLogger(__name__)

LIGHTNING_REPORT_STAGE_KEY = "_report_on"


class RayDDPStrategy(DDPStrategy):
    """Lightning's ``DDPStrategy`` on tandem's gang: the process group tandem's
    ``TorchConfig`` set up is reused, and the device is this worker's
    (``tandem.train.torch.get_device()``).

    For the arguments see Lightning's ``DDPStrategy``; set the process-group backend and
    timeout in ``TorchConfig`` instead.
    """

    @property
    def root_device(self) -> torch.device:
        return get_device()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": self.world_size, "rank": self.global_rank}


class RayFSDPStrategy(FSDPStrategy):
    """Lightning's ``FSDPStrategy`` on tandem's gang (parameters sharded across the
    workers); see ``RayDDPStrategy``."""

    @property
    def root_device(self) -> torch.device:
        return get_device()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": self.world_size, "rank": self.global_rank}


class RayDeepSpeedStrategy(DeepSpeedStrategy):
    """Lightning's ``DeepSpeedStrategy`` on tandem's gang. Needs ``deepspeed`` installed
    (Lightning raises, saying so, when it is not); see ``RayDDPStrategy``."""

    @property
    def root_device(self) -> torch.device:
        return get_device()

    @property
    def distributed_sampler_kwargs(self) -> dict[str, Any]:
        return {"num_replicas": self.world_size, "rank": self.global_rank}


class RayLightningEnvironment(LightningEnvironment):
    """Lightning's cluster environment read from tandem's train context: world size and
    ranks are the gang's."""

    def world_size(self) -> int:
        return get_context().get_world_size()

    def global_rank(self) -> int:
        return get_context().get_world_rank()

    def local_rank(self) -> int:
        return get_context().get_local_rank()

    def node_rank(self) -> int:
        return get_context().get_node_rank()

    def set_world_size(self, size: int) -> None:
        # Disabled: world_size() reads the train context.
        pass

    def set_global_rank(self, rank: int) -> None:
        # Disabled: global_rank() reads the train context.
        pass

    def teardown(self) -> None:
        pass


def prepare_trainer(trainer: Any) -> Any:
    """Checks that a Lightning ``Trainer`` is set up to run on tandem's gang (its strategy
    is one of the ``Ray*Strategy`` classes, its cluster environment
    ``RayLightningEnvironment``) and returns it.

    Raises:
        RuntimeError: another strategy or cluster environment, as Ray does.
    """
    valid_strategy_class = [RayDDPStrategy, RayFSDPStrategy, RayDeepSpeedStrategy]

    if not any(isinstance(trainer.strategy, cls) for cls in valid_strategy_class):
        raise RuntimeError(
            f"Invalid strategy class: {type(trainer.strategy)}. To use "
            "PyTorch Lightning with Ray, the strategy object should be one of "
            f"{[cls.__name__ for cls in valid_strategy_class]} class "
            "or its subclass."
        )

    cluster_environment = getattr(trainer.strategy, "cluster_environment", None)
    if cluster_environment and not isinstance(cluster_environment, RayLightningEnvironment):
        raise RuntimeError(
            "Invalid cluster environment plugin. The expected class is"
            "`ray.train.lightning.RayLightningEnvironment` "
            f"but got {type(cluster_environment)}!"
        )
    return trainer


class RayTrainReportCallback(Callback):
    """Reports ``trainer.callback_metrics`` (plus ``epoch`` and ``step``) and a checkpoint
    to tandem at the end of every training epoch, as Ray's callback does.

    Checkpoints are saved as::

        checkpoint_00000*/      tandem checkpoint
        └─ checkpoint.ckpt      PyTorch Lightning checkpoint

    Args:
        checkpoint_upload_mode: a ``CheckpointUploadMode`` passed to ``train.report``
            (None: ``SYNC``); with ``ASYNC``, ``train.report`` deletes the local folder.
        validation: passed to ``train.report``: ``True`` or a ``ValidationTaskConfig``
            validates each checkpoint with the trainer's ``ValidationConfig``.
    """

    CHECKPOINT_NAME = "checkpoint.ckpt"

    def __init__(self, checkpoint_upload_mode: Any = None, validation: Any = False) -> None:
        super().__init__()
        from tandem.train.v2.api.report_config import CheckpointUploadMode
        from tandem.train.v2.api.validation_config import ValidationTaskConfig

        if checkpoint_upload_mode is None:
            checkpoint_upload_mode = CheckpointUploadMode.SYNC
        if not isinstance(checkpoint_upload_mode, CheckpointUploadMode):
            raise ValueError(
                f"RayTrainReportCallback(checkpoint_upload_mode={checkpoint_upload_mode!r}): "
                f"pass a CheckpointUploadMode (SYNC, ASYNC or NO_UPLOAD) or None."
            )
        if validation is None:
            validation = False
        if not isinstance(validation, (bool, ValidationTaskConfig)):
            raise ValueError(
                f"RayTrainReportCallback(validation={validation!r}): pass True, False or a "
                f"ValidationTaskConfig."
            )
        self.checkpoint_upload_mode = checkpoint_upload_mode
        self.validation = validation
        ctx = get_context()
        run = ctx.get_run_path() or ""
        self.tmpdir_prefix = Path(
            tempfile.gettempdir(),
            f"lightning_checkpoints-run={abs(hash(run)):x}-name={ctx.get_experiment_name()}"
            f"-world_rank={ctx.get_world_rank()}",
        ).as_posix()
        if os.path.isdir(self.tmpdir_prefix):
            shutil.rmtree(self.tmpdir_prefix)

    def on_train_epoch_end(self, trainer: Any, pl_module: object) -> None:
        tmpdir = Path(self.tmpdir_prefix, str(trainer.current_epoch)).as_posix()
        os.makedirs(tmpdir, exist_ok=True)

        metrics = trainer.callback_metrics
        metrics = {k: v.item() for k, v in metrics.items()}
        metrics["epoch"] = trainer.current_epoch
        metrics["step"] = trainer.global_step

        ckpt_path = Path(tmpdir, self.CHECKPOINT_NAME).as_posix()
        trainer.save_checkpoint(ckpt_path, weights_only=False)

        checkpoint = Checkpoint.from_directory(tmpdir)
        report(metrics=metrics, checkpoint=checkpoint,
               checkpoint_upload_mode=self.checkpoint_upload_mode, validation=self.validation)

        # every worker has reported (and its checkpoint is copied) before any goes on
        trainer.strategy.barrier()
        if not self.checkpoint_upload_mode.default_delete_local_checkpoint_after_upload():
            shutil.rmtree(tmpdir, ignore_errors=True)  # ASYNC: report deleted it already
