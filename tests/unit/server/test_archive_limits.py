"""Every archive the server accepts has limits (issue 23 item 3): a 2 MiB tar.gz that
unpacks to 2 GiB is refused with 413 and nothing large reaches the disk; member count and
compression ratio are limited too, for registry uploads and working_dir packages."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import tarfile
import tempfile
import zipfile
import zlib

import httpx
import pytest

from tandem._core.archives import ArchiveLimitError, ArchiveLimits
from tandem.model.registry import unpack_to
from tandem.server import ServerConfig, TrainServer, create_app
from tandem.server.packages import PackageStore, UploadTooLargeError

GiB = 2**30
MiB = 2**20


def _gzip_member(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # a gzip member
    return c.compress(data) + c.flush()


def tar_gz_bomb(size: int = 2 * GiB) -> bytes:
    """A real tar.gz whose one member, model.pkl, holds ``size`` zero bytes: a gzip stream
    of many members (each 1 MiB of zeros compresses to ~1 KiB), as gzip allows."""
    info = tarfile.TarInfo("model.pkl")
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    zeros = _gzip_member(b"\0" * MiB)
    parts = [_gzip_member(header), zeros * (size // MiB)]
    parts.append(_gzip_member(b"\0" * (2 * tarfile.BLOCKSIZE + tarfile.RECORDSIZE)))
    return b"".join(parts)


def _du(path: str) -> int:
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except OSError:
                pass
    return total


def test_a_2_mib_tar_gz_bomb_is_refused_by_the_registry_route_with_413(tmp_path, monkeypatch):
    bomb = tar_gz_bomb()
    assert len(bomb) < 3 * MiB
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    server = TrainServer(ServerConfig(storage=str(tmp_path / "srv"), num_cpus=1,
                                      usage_interval_s=0, max_upload_bytes=8 * MiB))
    app = create_app(server, "tok")

    async def post(body: dict) -> httpx.Response:
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            return await c.post("/api/models/bomb/versions", json=body,
                                headers={"Authorization": "Bearer tok"})

    try:
        r = asyncio.run(post({"meta": {}, "files": base64.b64encode(bomb).decode()}))
        assert r.status_code == 413, r.text
        assert "unpacks to more than 64.0 MiB" in r.json()["detail"]
        r = asyncio.run(post({"meta": {}, "files": "AAAA"}))  # junk stays a 422
        assert r.status_code == 422, r.text
    finally:
        server.close()
    assert _du(str(tmp_path)) < 4 * MiB  # nothing large reached the disk


def test_unpack_limits_bytes_members_and_ratio(tmp_path):
    bomb = tar_gz_bomb(256 * MiB)
    with pytest.raises(ArchiveLimitError, match="times its packed size"):
        unpack_to(bomb, str(tmp_path / "a"), ArchiveLimits(max_bytes=100 * GiB))
    assert not (tmp_path / "a").exists()  # nothing was extracted

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for i in range(30):
            info = tarfile.TarInfo(f"f{i}")
            info.size = 1
            tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(ArchiveLimitError, match="more than 20 files"):
        unpack_to(buf.getvalue(), str(tmp_path / "b"), ArchiveLimits(max_bytes=GiB,
                                                                     max_members=20))
    unpack_to(buf.getvalue(), str(tmp_path / "c"), ArchiveLimits(max_bytes=GiB))
    assert len(os.listdir(tmp_path / "c")) == 30


def test_working_dir_packages_have_the_same_limits(tmp_path):
    store = PackageStore(str(tmp_path / "packages"), max_upload_bytes=MiB)
    many = io.BytesIO()
    with zipfile.ZipFile(many, "w") as zf:
        for i in range(10_001):
            zf.writestr(f"m{i}.py", b"")
    with pytest.raises(UploadTooLargeError, match="more than 10000 files"):
        store.add("a" * 16, many.getvalue())
    big = io.BytesIO()
    with zipfile.ZipFile(big, "w", zipfile.ZIP_DEFLATED) as zf, zf.open("zeros.bin", "w") as f:
        for _ in range(16):
            f.write(b"\0" * MiB)
    assert len(big.getvalue()) < MiB
    with pytest.raises(UploadTooLargeError, match="unpacks to more than 4.0 MiB"):
        store.add("b" * 16, big.getvalue())
    assert sorted(os.listdir(tmp_path / "packages")) == []  # nothing half-unpacked
    ok = io.BytesIO()
    with zipfile.ZipFile(ok, "w") as zf:
        zf.writestr("train.py", json.dumps({"ok": 1}))
    assert store.add("c" * 16, ok.getvalue())
