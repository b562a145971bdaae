"""The base of Ray's per-framework checkpoints (``XGBoostCheckpoint``, ``LightGBMCheckpoint``,
``TorchCheckpoint``): a ``Checkpoint`` folder with one model file, and an optional fitted
preprocessor kept beside it (Ray's ``set_preprocessor`` / ``get_preprocessor``)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from tandem.train.api.checkpoint import Checkpoint

_PREPROCESSOR_FILE = "preprocessor.pkl"
C = TypeVar("C", bound="FrameworkCheckpoint")


class FrameworkCheckpoint(Checkpoint):
    """A checkpoint holding one framework's model in ``MODEL_FILENAME``."""

    MODEL_FILENAME = "model"

    @classmethod
    def _new_dir(cls, path: str | None) -> Path:
        checkpoint_path = Path(path or tempfile.mkdtemp(prefix="tandem-ckpt-"))
        if not checkpoint_path.is_dir():
            raise ValueError(f"`path` must be a directory, but got: {checkpoint_path}")
        return checkpoint_path

    @classmethod
    def _finish(cls: type[C], directory: Path | str, preprocessor: object) -> C:
        checkpoint = cls(os.fspath(directory))
        if preprocessor is not None:
            checkpoint.set_preprocessor(preprocessor)
        return checkpoint

    def _model_path(self, directory: str) -> str:
        path = os.path.join(directory, self.MODEL_FILENAME)
        if not os.path.exists(path):
            raise RuntimeError(
                f"`{self.MODEL_FILENAME}` not found within this checkpoint ({self.path}). Make "
                f"sure you created this `{type(self).__name__}` from one of its public "
                f"constructors (`from_model`...)."
            )
        return path

    def set_preprocessor(self, preprocessor: object) -> None:
        """Keeps a fitted preprocessor (pickled) in the checkpoint folder."""
        import cloudpickle

        from tandem.train.api.files import join_path, write_file

        write_file(join_path(self.path, _PREPROCESSOR_FILE), cloudpickle.dumps(preprocessor))

    def get_preprocessor(self) -> Any:
        """The preprocessor kept by ``set_preprocessor``, or None."""
        import cloudpickle

        from tandem.train.api.files import join_path, read_file

        data = read_file(join_path(self.path, _PREPROCESSOR_FILE))
        return None if data is None else cloudpickle.loads(data)
