"""The train server's model registry routes (cluster-scoped registry, behind the token):
``models_router(server)``, an ``APIRouter`` that sees the server as a ``ServerContext``
(its registry is ``server.models_store()``). A missing name, version or alias is answered
404 and a refusal of the registry 409 (``routes/errors.py``).

=================================================  ======================================
``GET    /api/models``                             registered names (versions, aliases)
``GET    /api/models/{name}``                      one name's versions, oldest first
``GET    /api/models/{name}/versions/{ref}``       one version (a number, an alias, latest)
``GET    /api/models/{name}/versions/{v}/files``   its files (a gzipped tar)
``POST   /api/models/{name}/versions``             store a version (``meta``, ``files``:
                                                   base64 of a gzipped tar, ``version``)
``PUT    /api/models/{name}/aliases/{alias}``      point an alias at ``{"version": v}``
``DELETE /api/models/{name}/versions/{v}``         delete a version (409 while aliased)
=================================================  ======================================

The rows live in the server's own database (``--db``; tables ``tandem_model_versions`` and
``tandem_model_aliases``), the files under ``<server storage>/models`` or the fsspec URL in
``$TANDEM_MODELS_STORAGE`` (e.g. ``s3://bucket/models``).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import tempfile
from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from tandem._core.archives import ArchiveLimitError, ArchiveLimits
from tandem.model.registry import ModelRef, check_not_served, unpack_to
from tandem.server.context import ServerContext
from tandem.server.routes.common import TandemJSONResponse, err

MAX_VERSION = 2**31 - 1  # versions are INTEGER columns in the store (32-bit on PostgreSQL)
MAX_META_DEPTH = 32  # how deeply a version's meta may nest


def json_depth(value: object, stop: int) -> int:
    """How deeply a parsed JSON value nests (counting stops at ``stop``), without recursion."""
    deepest = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        cur, d = todo.pop()
        if isinstance(cur, (dict, list)):
            deepest = max(deepest, d)
            if d >= stop:
                return d
            todo.extend((v, d + 1) for v in (cur.values() if isinstance(cur, dict) else cur))
    return deepest

NamePath = Path(..., min_length=1, max_length=128, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$",
                description="a model name")


class AliasIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    version: int = Field(..., ge=1, le=MAX_VERSION, description="the version the alias points at")


class PutIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    meta: dict[str, Any] = Field(default_factory=dict)
    version: int | None = Field(None, ge=1, le=MAX_VERSION)
    files: str = Field(..., min_length=1, description="base64 of a gzipped tar of the files")



_WHAT = {
    400: "the body is not JSON, or is nested too deeply to read",
    401: "missing or wrong token",
    404: "no such model, version or alias (the detail lists what exists)",
    409: "refused by the registry (deleting a version an alias points at, or one that a "
         "serve job serves: the job is named)",
    413: "the upload, or what its files unpack to, is over the server's limits",
    422: "invalid input: the field and the reason are named",
    503: "this server lost its job store to another server and writes nothing more",
}


def _docs(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route really gives, for the OpenAPI document."""
    return {c: {"description": _WHAT[c]} for c in (401, *codes)}


def _deposed(server: ServerContext) -> Response | None:
    """A server another one took the store from writes nothing, the registry included."""
    reason = server.deposed
    return err(503, f"{reason} The request was not carried out.") if reason else None


def models_router(server: ServerContext) -> APIRouter:
    """The routes above, on the server's registry (``server.models_store()``)."""
    router = APIRouter(prefix="/api/models", tags=["models"])
    limit = server.config.max_upload_bytes
    # A version's files may unpack to 8 times the upload limit, 10,000 files, and (past
    # 8 MiB) 200 times their packed size: weights hardly compress, bombs do.
    unpack_limits = ArchiveLimits(max_bytes=8 * limit, max_members=10_000)

    @router.get("", responses=_docs())
    def list_models() -> dict[str, Any]:
        return {"models": server.models_store().names()}

    @router.get("/{name}", responses=_docs(404, 422))
    def list_versions(name: str = NamePath) -> dict[str, Any]:
        return {"name": name, "versions": [r.to_dict() for r in
                                           server.models_store().versions(name)]}

    @router.get("/{name}/versions/{ref}", responses=_docs(404, 422))
    def get_version(name: str = NamePath,
                    ref: str = Path(..., min_length=1, max_length=64)) -> dict[str, Any]:
        return server.models_store().resolve(ModelRef.parse(f"{name}@{ref}")).to_dict()

    @router.get("/{name}/versions/{version}/files", response_class=Response,
                responses=_docs(404, 422))
    def get_files(
        name: str = NamePath, version: int = Path(..., ge=1, le=MAX_VERSION)
    ) -> Response:
        store = server.models_store()
        record = store.resolve(ModelRef(name, version))
        return Response(store.tar_bytes(record), media_type="application/gzip")

    @router.post("/{name}/versions", status_code=201, responses=_docs(400, 409, 413, 422, 503))
    async def put_version(request: Request, name: str = NamePath) -> Any:
        refused = _deposed(server)
        if refused is not None:
            return refused
        size = int(request.headers.get("content-length") or 0)
        if size > limit:
            return err(413, f"the model upload is {size} bytes; this server takes at most "
                             f"{limit} (start it with a larger --max-upload-mb).")
        raw = await request.body()
        if len(raw) > limit:
            return err(413, f"the model upload is over {limit} bytes.")
        try:
            parsed = json.loads(raw)
        except RecursionError:
            return err(400, f"the body is JSON nested deeper than this server reads; "
                             f"keep meta within {MAX_META_DEPTH} levels.")
        except ValueError as e:
            return err(400, f"the body is not JSON ({e}); send {{'meta': {{...}}, "
                             f"'files': BASE64, 'version': null}}."[:2000])
        depth = json_depth(parsed, MAX_META_DEPTH + 2)
        if depth > MAX_META_DEPTH + 1:
            return err(422, f"meta is nested more than {MAX_META_DEPTH} levels deep; "
                             f"flatten it (it holds a version's config, metrics and tags).")
        try:
            body = PutIn.model_validate(parsed)
            data = base64.b64decode(body.files, validate=True)
        except (ValueError, binascii.Error) as e:
            return err(422, f"the body must be JSON {{'meta': {{...}}, 'files': BASE64, "
                             f"'version': null}}: {e}"[:2000])
        return await run_in_threadpool(_store_version, name, data, body)

    def _store_version(name: str, data: bytes, body: PutIn) -> object:
        with tempfile.TemporaryDirectory(prefix="tandem-upload-") as tmp:
            try:
                unpack_to(data, tmp, unpack_limits)
            except ArchiveLimitError as e:
                return err(413, str(e))
            except Exception as e:  # noqa: BLE001 - a bad archive is the client's error
                return err(422, f"files is not a gzipped tar: {type(e).__name__}: {e}")
            if not os.path.exists(os.path.join(tmp, "model.pkl")):
                return err(422, "files has no model.pkl; upload a directory written by "
                                 "Model.save (model.put does this).")
            record = server.models_store().add(name, tmp, body.meta, version=body.version)
        return TandemJSONResponse(record.to_dict(), status_code=201)

    @router.put("/{name}/aliases/{alias}", responses=_docs(404, 409, 422, 503))
    def set_alias(body: AliasIn, name: str = NamePath,
                  alias: str = Path(..., min_length=1, max_length=64)) -> Any:
        refused = _deposed(server)
        if refused is not None:
            return refused
        return server.models_store().set_alias(name, alias, body.version).to_dict()

    @router.delete("/{name}/versions/{version}", responses=_docs(404, 409, 422, 503))
    def delete_version(
        name: str = NamePath, version: int = Path(..., ge=1, le=MAX_VERSION)
    ) -> Any:
        refused = _deposed(server)
        if refused is not None:
            return refused
        check_not_served(name, version, server.service)  # RegistryError: 409, naming the job
        return server.models_store().delete(name, version).to_dict()

    return router
