"""``TensorflowCheckpoint``: a ``Checkpoint`` holding a Keras model (Ray's, deprecated there
in favour of ``Checkpoint``; kept for programs that use it)."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from typing import Any

from tandem.train.api.checkpoint import Checkpoint

MODEL_FILENAME_KEY = "_model_filename"
_META = ".tandem_tf_checkpoint.json"


class TensorflowCheckpoint(Checkpoint):
    """A checkpoint folder with a Keras model in it (``model.keras``, an ``.h5`` file or a
    SavedModel folder); ``get_model()`` loads it."""

    MODEL_FILENAME_KEY = MODEL_FILENAME_KEY

    @classmethod
    def from_model(cls, model: Any, *, preprocessor: object = None) -> TensorflowCheckpoint:
        """Saves ``model`` (``model.save``) into a new temporary folder."""
        tempdir = tempfile.mkdtemp(prefix="tandem-tf-ckpt-")
        filename = "model.keras"
        model.save(os.path.join(tempdir, filename))
        return cls._with_filename(tempdir, filename)

    @classmethod
    def from_h5(cls, file_path: str, *, preprocessor: object = None) -> TensorflowCheckpoint:
        if not os.path.isfile(file_path) or not file_path.endswith(".h5"):
            raise ValueError("Please supply a h5 file path to `TensorflowCheckpoint.from_h5()`.")
        tempdir = tempfile.mkdtemp(prefix="tandem-tf-ckpt-")
        shutil.copy(file_path, tempdir)
        return cls._with_filename(tempdir, os.path.basename(file_path))

    @classmethod
    def from_saved_model(cls, dir_path: str, *, preprocessor: object = None) -> TensorflowCheckpoint:
        if not os.path.isdir(dir_path):
            raise ValueError(
                "Please supply a directory to `TensorflowCheckpoint.from_saved_model`")
        tempdir = tempfile.mkdtemp(prefix="tandem-tf-ckpt-")
        shutil.copytree(dir_path, tempdir, dirs_exist_ok=True)
        return cls._with_filename(tempdir, ".")

    @classmethod
    def _with_filename(cls, directory: str, filename: str) -> TensorflowCheckpoint:
        with open(os.path.join(directory, _META), "w") as f:
            json.dump({MODEL_FILENAME_KEY: filename}, f)
        return cls(directory)

    def get_model(self) -> Any:
        """The Keras model this checkpoint holds (``tf.keras.models.load_model``)."""
        import tensorflow as tf

        with self.as_directory() as d:
            meta_path = os.path.join(d, _META)
            if not os.path.exists(meta_path):
                raise ValueError(
                    f"{self.path} was not written by TensorflowCheckpoint.from_model/from_h5/"
                    f"from_saved_model, so it names no model file; load the model yourself "
                    f"from the folder."
                )
            with open(meta_path) as f:
                filename = json.load(f)[MODEL_FILENAME_KEY]
            return tf.keras.models.load_model(os.path.join(d, filename))
