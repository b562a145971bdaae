"""``Checkpoint``: a directory in storage (a local path or any fsspec URL)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
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

    def __init__(self, path: str | os.PathLike, filesystem: Any = None) -> None:
        """``path``: a local folder or fsspec URL; with ``filesystem`` (a
        ``pyarrow.fs.FileSystem``, as Ray's), the folder inside it, mapped to its URL (the
        form every process can open)."""
        if filesystem is not None:
            path = storage_url(filesystem, os.fspath(path))
        self.path = os.fspath(path)

    @property
    def filesystem(self) -> Any:
        """The ``pyarrow.fs.FileSystem`` holding this checkpoint (Ray's attribute)."""
        return arrow_filesystem(self.path)

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

    def set_metadata(self, metadata: Mapping[str, object]) -> None:
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

    def update_metadata(self, metadata: Mapping[str, object]) -> None:
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


def storage_url(filesystem: object, path: str | None) -> str:
    """The local path or fsspec URL that ``RunConfig(storage_filesystem=fs,
    storage_path=path)`` names: workers in other processes open storage by URL, so a
    ``pyarrow.fs`` filesystem is mapped to its URL (local, S3, GCS, HDFS, a ``SubTree`` of
    one, or an fsspec filesystem wrapped in ``PyFileSystem(FSSpecHandler(...))``).

    Raises:
        ConfigError: not a ``pyarrow.fs.FileSystem``, no ``storage_path``, or a filesystem
            with no URL (such as a custom ``PyFileSystem`` handler).
    """
    import pyarrow.fs as pafs  # type: ignore[import-untyped,unused-ignore]

    if not isinstance(filesystem, pafs.FileSystem):
        raise ConfigError(
            f"RunConfig(storage_filesystem={filesystem!r}) must be a pyarrow.fs.FileSystem "
            f"(e.g. pyarrow.fs.S3FileSystem(...)), got {type(filesystem).__name__}."
        )
    if not path:
        raise ConfigError(
            "RunConfig(storage_filesystem=...) needs storage_path: the folder inside that "
            "filesystem, e.g. storage_path='bucket/results'."
        )
    path = os.fspath(path)
    if isinstance(filesystem, pafs.SubTreeFileSystem):
        return storage_url(filesystem.base_fs, filesystem.base_path.rstrip("/") + "/" +
                           path.lstrip("/"))
    if isinstance(filesystem, pafs.LocalFileSystem):
        return os.path.abspath(os.path.expanduser(path))
    if isinstance(filesystem, pafs.PyFileSystem):
        handler = filesystem.handler
        inner = getattr(handler, "fs", None)
        if inner is not None and hasattr(inner, "unstrip_protocol"):
            url = str(inner.unstrip_protocol(path))
            return url.removeprefix("file://") if url.startswith("file://") else url
    schemes = {"s3": "s3", "gcs": "gs", "hdfs": "hdfs"}
    scheme = schemes.get(filesystem.type_name)
    if scheme is not None:
        return f"{scheme}://{path.lstrip('/')}"
    raise ConfigError(
        f"RunConfig(storage_filesystem={filesystem!r}): tandem's workers open storage by "
        f"URL, and this {filesystem.type_name!r} filesystem has none. Use a local, S3, GCS "
        f"or HDFS pyarrow filesystem, wrap an fsspec filesystem with "
        f"pyarrow.fs.PyFileSystem(pyarrow.fs.FSSpecHandler(fs)), or pass storage_path as an "
        f"fsspec URL instead."
    )


def arrow_filesystem(path: str) -> Any:
    """A ``pyarrow.fs.FileSystem`` for a local path or an fsspec URL."""
    import pyarrow.fs as pafs  # type: ignore[import-untyped,unused-ignore]

    if not _is_url(path):
        return pafs.LocalFileSystem()
    return pafs.PyFileSystem(pafs.FSSpecHandler(get_fs(path)[0]))
