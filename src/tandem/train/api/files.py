"""Files and folders on a local path or an fsspec URL (``s3://...``, ``local://...``).

Any path with ``://`` goes through fsspec (``file://`` included); anything else is a plain
local path.
"""

from __future__ import annotations

import os
import shutil

from tandem.train.api.checkpoint import get_fs


def join_path(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name if "://" in base else os.path.join(base, name)


def make_dirs(path: str) -> None:
    if "://" in path:
        fs, p = get_fs(path)
        fs.makedirs(p, exist_ok=True)
    else:
        os.makedirs(path, exist_ok=True)


def write_file(path: str, data: bytes) -> None:
    """Replaces the file whole: a rename on a local path, one object write on a URL."""
    if "://" in path:
        fs, p = get_fs(path)
        with fs.open(p, "wb") as f:
            f.write(data)
        return
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def read_file(path: str) -> bytes | None:
    """The file's bytes, or None if it does not exist."""
    try:
        if "://" in path:
            fs, p = get_fs(path)
            with fs.open(p, "rb") as f:
                return f.read()
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None


def remove_dir(path: str) -> None:
    """Removes a folder and everything in it; a missing one is fine."""
    if "://" in path:
        fs, p = get_fs(path)
        try:
            fs.rm(p, recursive=True)
        except FileNotFoundError:
            pass
    else:
        shutil.rmtree(path, ignore_errors=True)
