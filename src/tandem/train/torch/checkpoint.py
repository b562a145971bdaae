"""``TorchCheckpoint``: a ``Checkpoint`` holding a torch model or its state dict (Ray's;
Ray recommends ``Checkpoint`` with ``torch.save``, kept for programs that use it)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tandem.train._framework_checkpoint import FrameworkCheckpoint

__all__ = ["TorchCheckpoint"]


class TorchCheckpoint(FrameworkCheckpoint):
    """A checkpoint folder with ``model.pt``: a state dict (``from_state_dict``, the
    recommended way) or a whole pickled module (``from_model``)."""

    MODEL_FILENAME = "model.pt"

    @classmethod
    def from_state_dict(cls, state_dict: Mapping[str, object], *,
                        preprocessor: object = None) -> TorchCheckpoint:
        """Saves ``state_dict`` (a ``module.`` prefix left by DDP is removed, as Ray does)."""
        import torch

        d = cls._new_dir(None)
        stripped = {k.removeprefix("module."): v for k, v in state_dict.items()}
        torch.save(stripped, Path(d, cls.MODEL_FILENAME).as_posix())
        return cls._finish(d, preprocessor)

    @classmethod
    def from_model(cls, model: object, *, preprocessor: object = None) -> TorchCheckpoint:
        """Saves the whole module (pickled; loading it runs its code: prefer
        ``from_state_dict`` for checkpoints others may load)."""
        import torch

        d = cls._new_dir(None)
        torch.save(model, Path(d, cls.MODEL_FILENAME).as_posix())
        return cls._finish(d, preprocessor)

    def get_model(self, model: Any = None) -> Any:
        """The module: the saved one, or ``model`` with the saved state dict loaded.

        Raises:
            ValueError: the checkpoint holds a state dict and no ``model`` was given.
        """
        import torch

        with self.as_directory() as d:
            saved = torch.load(self._model_path(d), map_location="cpu", weights_only=False)
        if isinstance(saved, torch.nn.Module):
            if model is not None:
                warnings.warn("TorchCheckpoint already contains all information needed. "
                              "Discarding provided `model` argument.", stacklevel=2)
            return saved
        if model is None:
            raise ValueError(
                "Attempting to load torch model from a state_dict, but no `model_definition` "
                "was provided: pass the module to load it into, get_model(model)."
            )
        if not isinstance(saved, dict):
            raise ValueError(
                f"Saved model is of type {type(saved)}. The model saved in the checkpoint is "
                "expected to be of type `torch.nn.Module`, or a model state dict of type dict."
            )
        model.load_state_dict(saved)
        return model
