"""The 1.x checkpoint format: a dict, pickled into one file of a checkpoint directory.

``train.save_checkpoint(**state)`` writes ``state`` with cloudpickle into
``<dir>/dict_checkpoint.pkl``; the directory then travels like any other checkpoint
(copied to ``<run>/checkpoint_NNNNNN/``, kept or deleted by the ``CheckpointConfig``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError
from tandem.train.api.checkpoint import Checkpoint

DICT_FILE = "dict_checkpoint.pkl"


def write_dict(state: dict[str, object], directory: str) -> None:
    """Pickles ``state`` into ``directory`` (created if needed)."""
    os.makedirs(directory, exist_ok=True)
    tmp = os.path.join(directory, DICT_FILE + ".tmp")
    with open(tmp, "wb") as f:
        cloudpickle.dump(state, f)
    os.replace(tmp, os.path.join(directory, DICT_FILE))


def read_dict(checkpoint: Checkpoint) -> dict[str, Any] | None:
    """The dict saved in ``checkpoint``, or None when it was not written by ``save_checkpoint``."""
    with checkpoint.as_directory() as d:
        path = os.path.join(d, DICT_FILE)
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            return cloudpickle.load(f)


def materialize(checkpoint: object, dest: str) -> Checkpoint | None:
    """Turns what ``Trainer.run(checkpoint=...)`` accepts into a checkpoint directory at ``dest``.

    Accepted: None, a dict, a ``Checkpoint``, the path of a checkpoint directory, or the
    path of a 1.x checkpoint file (a pickled dict).

    Raises:
        ConfigError: a path that does not exist, or a value of another type.
    """
    if checkpoint is None:
        return None
    if isinstance(checkpoint, dict):
        write_dict(checkpoint, dest)
        return Checkpoint(dest)
    if isinstance(checkpoint, Checkpoint):
        return _copy_dir(checkpoint, dest)
    if isinstance(checkpoint, (str, os.PathLike)):
        path = os.path.expanduser(os.fspath(checkpoint))
        if "://" in path and not path.startswith("file://"):
            return _copy_dir(Checkpoint(path), dest)
        if os.path.isdir(path):
            return _copy_dir(Checkpoint(os.path.abspath(path)), dest)
        if os.path.isfile(path):
            with open(path, "rb") as f:
                state = cloudpickle.load(f)
            if not isinstance(state, dict):
                raise ConfigError(
                    f"Trainer.run(checkpoint={checkpoint!r}): that file holds a "
                    f"{type(state).__name__}, not a checkpoint dict."
                )
            write_dict(state, dest)
            return Checkpoint(dest)
        raise ConfigError(
            f"Trainer.run(checkpoint={checkpoint!r}): no such file or directory. Pass a dict "
            f"(e.g. trainer.latest_checkpoint), a checkpoint directory, or a checkpoint file."
        )
    raise ConfigError(
        f"Trainer.run(checkpoint=...) takes a dict, a path or a Checkpoint, got "
        f"{type(checkpoint).__name__}."
    )


def _copy_dir(checkpoint: Checkpoint, dest: str) -> Checkpoint:
    if not checkpoint.exists():
        raise ConfigError(
            f"Trainer.run(checkpoint={checkpoint.path!r}): that checkpoint directory does not "
            f"exist (any more?)."
        )
    checkpoint.to_directory(dest)
    return Checkpoint(dest)


def new_local_dir() -> str:
    return tempfile.mkdtemp(prefix="tandem-legacy-ckpt-")


def remove_local_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
