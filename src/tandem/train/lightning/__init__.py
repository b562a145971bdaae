"""PyTorch Lightning on tandem: Ray Train's ``ray.train.lightning`` names.

A Lightning ``Trainer`` runs inside each worker of a ``TorchTrainer``; these pieces make it
use the gang tandem started (ranks, the process group, the device) and report to tandem::

    trainer = pl.Trainer(strategy=RayDDPStrategy(), plugins=[RayLightningEnvironment()],
                         callbacks=[RayTrainReportCallback()], devices="auto",
                         accelerator="auto", enable_checkpointing=False)
    trainer = prepare_trainer(trainer)
    trainer.fit(model, train_dataloaders=loader)

Needs ``lightning`` (or ``pytorch_lightning``): ``pip install 'tandem-ml[lightning]'``.
"""

# isort: off
from tandem._core.extras import install_command

try:
    import lightning  # noqa: F401
except ModuleNotFoundError:
    try:
        import pytorch_lightning  # noqa: F401
    except ModuleNotFoundError:
        raise ModuleNotFoundError(
            "PyTorch Lightning isn't installed. To install PyTorch Lightning, "
            f"please run {install_command('lightning')}"
        ) from None
# isort: on

from tandem.train.lightning._lightning_utils import (
    RayDDPStrategy,
    RayDeepSpeedStrategy,
    RayFSDPStrategy,
    RayLightningEnvironment,
    RayTrainReportCallback,
    prepare_trainer,
)

__all__ = [
    "RayDDPStrategy",
    "RayDeepSpeedStrategy",
    "RayFSDPStrategy",
    "RayLightningEnvironment",
    "RayTrainReportCallback",
    "prepare_trainer",
]
