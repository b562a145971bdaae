"""Hugging Face ``transformers.Trainer`` on tandem: Ray Train's
``ray.train.huggingface.transformers`` names (``prepare_trainer``,
``RayTrainReportCallback``). A ``transformers.Trainer`` runs inside each worker of a
``TorchTrainer`` and uses the process group tandem started. Needs ``transformers`` and
``accelerate``: ``pip install 'tandem-ml[transformers]'``."""

from tandem.train.huggingface.transformers._transformers_utils import (
    RayTrainReportCallback,
    prepare_trainer,
)

__all__ = [
    "RayTrainReportCallback",
    "prepare_trainer",
]
