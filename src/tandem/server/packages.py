"""Uploaded ``working_dir`` packages: zips unpacked under ``<storage>/packages/<id>/`` so a
job's own modules import on the server.

An archive is hostile input: unsafe paths, a file and a folder of the same name, archives
that expand far beyond their size, unsupported compression or encryption, truncated data
— every one is refused with a ``PayloadError`` (HTTP 422), and nothing half-unpacked is
left behind.
"""

from __future__ import annotations

import io
import os
import shutil
import zipfile
import zlib

from tandem._core.archives import ArchiveBudget, ArchiveLimitError, ArchiveLimits
from tandem._core.errors import ConfigError, TandemError
from tandem._core.ids import new_id
from tandem.server.loader import PayloadError

__all__ = ["PackageStore", "UploadTooLargeError"]


class UploadTooLargeError(TandemError, ValueError):
    """A request body over the server's limit (HTTP 413)."""


class PackageStore:
    """The packages of one server. Thread-safe (each upload unpacks into its own temp
    folder, renamed into place)."""

    def __init__(self, root: str, max_upload_bytes: int) -> None:
        self.root = root
        self.max_upload_bytes = max_upload_bytes
        os.makedirs(root, exist_ok=True)

    def path(self, package_id: str) -> str:
        return os.path.join(self.root, package_id)

    def has(self, package_id: str) -> bool:
        return os.path.isdir(self.path(package_id))

    def working_dir(self, package_id: str | None) -> str | None:
        """The folder of a package named by ``runtime_env.working_dir``, or None."""
        if not package_id:
            return None
        if not self.has(package_id):
            raise ConfigError(
                f"runtime_env.working_dir names the package {package_id!r}, which this server "
                f"does not have; upload it first with PUT /api/packages/{package_id} (the "
                f"tandem client does this for you)."
            )
        return self.path(package_id)

    def add(self, package_id: str, data: bytes) -> bool:
        """Unpacks an uploaded working_dir zip; returns False if it was already here.

        Raises:
            UploadTooLargeError: the upload, or what it unpacks to, is over the limit.
            PayloadError: not a zip this server can unpack safely (the reason is named).
        """
        if len(data) > self.max_upload_bytes:
            raise UploadTooLargeError(self.too_large(len(data)))
        target = self.path(package_id)
        if os.path.isdir(target):
            return False
        tmp = f"{target}.tmp-{new_id()}"
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                self._check(zf, len(data))
                zf.extractall(tmp)
        except (UploadTooLargeError, PayloadError):
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, EOFError, zlib.error,
                RuntimeError, NotImplementedError, ValueError) as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise PayloadError(
                f"the uploaded working_dir package cannot be unpacked ({type(e).__name__}: "
                f"{e}); upload what tandem.jobs.client.package_working_dir() makes"
            ) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, target)
        except OSError:  # uploaded twice at once
            shutil.rmtree(tmp, ignore_errors=True)
        return True

    def limits(self) -> ArchiveLimits:
        """What a package may unpack to: 4 times the upload limit, 10,000 members, and
        (past 8 MiB) 200 times its packed size."""
        return ArchiveLimits(max_bytes=4 * self.max_upload_bytes, max_members=10_000)

    def _check(self, zf: zipfile.ZipFile, packed: int) -> None:
        budget = ArchiveBudget(self.limits(), packed, "the working_dir package",
                               "leave data and outputs out of runtime_env['working_dir'] "
                               "(list them in .gitignore), or start the server with a "
                               "larger --max-upload-mb")
        files: set[str] = set()
        dirs: set[str] = set()
        for info in zf.infolist():
            name = info.filename
            parts = name.rstrip("/").split("/")
            if (name.startswith("/") or "\\" in name or "\x00" in name or ".." in parts
                    or any(p in ("", ".") for p in parts)):
                raise PayloadError(f"the package has an unsafe path {name!r}; paths are "
                                   f"relative, with no '..', '.', empty or absolute parts")
            for i in range(1, len(parts)):
                dirs.add("/".join(parts[:i]))
            if info.is_dir():
                dirs.add("/".join(parts))
            else:
                key = "/".join(parts)
                if key in files:
                    raise PayloadError(f"the package holds {name!r} twice")
                files.add(key)
            try:
                budget.add(name, info.file_size)
            except ArchiveLimitError as e:
                raise UploadTooLargeError(str(e)) from None
        clash = files & dirs
        if clash:
            name = min(clash)
            raise PayloadError(f"the package holds {name!r} both as a file and as a folder")

    def too_large(self, size: int) -> str:
        return (
            f"the upload is {size / 2**20:.1f} MiB, over this server's limit of "
            f"{self.max_upload_bytes / 2**20:.0f} MiB. Leave data and outputs out of "
            f"runtime_env['working_dir'] (list them in .gitignore), keep large datasets in "
            f"storage the workers read, or start the server with a larger --max-upload-mb."
        )
