"""``Checkpoint``: a directory in storage (a local path or any fsspec URL)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from tandem._core.errors import ConfigError


def _is_url(path: str) -> bool:
    return "://" in path and not path.startswith("file://")


def get_fs(path: str) -> tuple[Any, str]:
    """``(filesystem, path within it)`` for a local path or fsspec URL."""
    import fsspec

    return fsspec.core.url_to_fs(path)


class Checkpoint:
    """A directory of files that together let training resume.

    Create one from a local directory you wrote with ``Checkpoint.from_directory(path)``
    and pass it to ``train.report``; read one with ``as_directory()`` or ``to_directory()``.
    """

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = str(path)

    @classmethod
    def from_directory(cls, path: str | os.PathLike) -> Checkpoint:
        path = os.fspath(path)
        if not _is_url(path):
            path = path.removeprefix("file://")
            if not os.path.isdir(path):
                what = "a file" if os.path.exists(path) else "missing"
                raise ConfigError(
                    f"Checkpoint.from_directory({path!r}): that directory is {what}. A "
                    f"checkpoint is a directory: write your files into one (e.g. with "
                    f"tempfile.mkdtemp()) and pass its path."
                )
            path = os.path.abspath(path)
        return cls(path)

    @property
    def is_local(self) -> bool:
        return not _is_url(self.path)

    def exists(self) -> bool:
        if self.is_local:
            return os.path.isdir(self.path)
        fs, p = get_fs(self.path)
        return fs.isdir(p)

    def to_directory(self, path: str | os.PathLike | None = None) -> str:
        """Copies the checkpoint into ``path`` (a new temporary directory by default)."""
        dest = os.fspath(path) if path is not None else tempfile.mkdtemp(prefix="tandem-ckpt-")
        os.makedirs(dest, exist_ok=True)
        if self.is_local:
            shutil.copytree(self.path, dest, dirs_exist_ok=True)
        else:
            fs, p = get_fs(self.path)
            fs.get(p.rstrip("/") + "/", dest.rstrip("/") + "/", recursive=True)
        return dest

    @contextlib.contextmanager
    def as_directory(self) -> Iterator[str]:
        """A local directory with the checkpoint's files (the original if it is local)."""
        if self.is_local:
            yield self.path
            return
        tmp = self.to_directory()
        try:
            yield tmp
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    # -- Ray's checkpoint metadata: a JSON dict in ``.metadata.json`` inside the folder --
    _METADATA_FILE = ".metadata.json"

    def get_metadata(self) -> dict[str, Any]:
        """The metadata dict stored with this checkpoint ({} when none was set)."""
        import json

        target = self.path.rstrip("/") + "/" + self._METADATA_FILE
        try:
            if _is_url(self.path):
                fs, p = get_fs(target)
                with fs.open(p, "r") as f:
                    return dict(json.load(f))
            with open(target) as f:
                return dict(json.load(f))
        except FileNotFoundError:
            return {}

    def set_metadata(self, metadata: dict[str, Any]) -> None:
        """Stores ``metadata`` (JSON-serializable) with this checkpoint, replacing any.

        Raises:
            TypeError: ``metadata`` does not serialize to JSON.
        """
        import json

        try:
            text = json.dumps(metadata)
        except TypeError as e:
            raise TypeError(f"Checkpoint metadata must be JSON-serializable: {e}") from e
        target = self.path.rstrip("/") + "/" + self._METADATA_FILE
        if _is_url(self.path):
            fs, p = get_fs(target)
            with fs.open(p, "w") as f:
                f.write(text)
        else:
            with open(target, "w") as f:
                f.write(text)

    def update_metadata(self, metadata: dict[str, Any]) -> None:
        """Merges ``metadata`` into the stored metadata."""
        merged = self.get_metadata()
        merged.update(metadata)
        self.set_metadata(merged)

    def __fspath__(self) -> str:
        return self.path

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Checkpoint) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"Checkpoint(path={self.path!r})"
