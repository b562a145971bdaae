"""The registry of a train server, reached over its HTTP API (``/api/models...``)."""

from __future__ import annotations

import base64
import os
from typing import Any
from urllib.parse import quote

from tandem.jobs.client.errors import Conflict, NotFound
from tandem.model.registry._ref import ModelNotFoundError, ModelRef, RegistryError
from tandem.model.registry._store import VersionRecord, pack_dir, unpack_to


class RemoteRegistry:
    """Same surface as ``ModelStore``; every call is one request to the server."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn  # a tandem.jobs.client.ServerConnection
        self.url = conn.url

    def where(self) -> str:
        return f"the train server at {self.url}"

    def _call(self, method: str, path: str, **kwargs: object) -> Any:
        try:
            return self._conn.json(method, path, **kwargs)
        except NotFound as e:
            raise ModelNotFoundError(e.detail) from None
        except Conflict as e:
            raise RegistryError(e.detail) from None

    def add(self, name: str, src_dir: str, meta: dict[str, Any],
            version: int | None = None) -> VersionRecord:
        body = {"meta": meta, "version": version,
                "files": base64.b64encode(pack_dir(src_dir)).decode("ascii")}
        return VersionRecord.from_dict(
            self._call("POST", f"/api/models/{quote(name)}/versions", json=body))

    def resolve(self, ref: ModelRef | str) -> VersionRecord:
        ref = ModelRef.parse(ref)
        tail = "latest" if ref.version is None and ref.alias is None else (
            str(ref.version) if ref.version is not None else str(ref.alias))
        return VersionRecord.from_dict(
            self._call("GET", f"/api/models/{quote(ref.name)}/versions/{quote(tail)}"))

    def versions(self, name: str) -> list[VersionRecord]:
        data = self._call("GET", f"/api/models/{quote(name)}")
        return [VersionRecord.from_dict(d) for d in data["versions"]]

    def names(self) -> list[dict[str, Any]]:
        return list(self._call("GET", "/api/models")["models"])

    def set_alias(self, name: str, alias: str, version: int) -> VersionRecord:
        return VersionRecord.from_dict(self._call(
            "PUT", f"/api/models/{quote(name)}/aliases/{quote(alias)}",
            json={"version": int(version)}))

    def delete(self, name: str, version: int) -> VersionRecord:
        return VersionRecord.from_dict(
            self._call("DELETE", f"/api/models/{quote(name)}/versions/{int(version)}"))

    def download(self, record: VersionRecord, dest: str) -> str:
        try:
            r = self._conn.request(
                "GET", f"/api/models/{quote(record.name)}/versions/{record.version}/files")
        except NotFound as e:
            raise ModelNotFoundError(e.detail) from None
        unpack_to(r.content, dest)
        os.makedirs(dest, exist_ok=True)
        return dest
