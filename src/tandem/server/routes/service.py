"""``/api/health``, ``/api/cluster`` and ``PUT /api/packages/{id}``."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.concurrency import run_in_threadpool

from tandem.server.core import TrainServer
from tandem.server.routes.common import (
    ErrorOut,
    PackageOut,
    TandemJSONResponse,
    _answers,
    err,
)


def service_router(server: TrainServer) -> APIRouter:
    """The server's own routes: health, the cluster, working_dir packages."""
    from tandem import __version__

    app = APIRouter()
    limit_bytes = server.config.max_upload_bytes

    @app.get("/api/health", responses={
        503: {"model": ErrorOut, "description": "the job store is unreachable (reason given)"},
        401: {"model": ErrorOut, "description": "missing or wrong token"}})
    def health() -> Any:
        problem = server.store_problem()
        out = {"status": "ok" if problem is None else "store_unavailable",
               "version": __version__, "pid": os.getpid(),
               "started_at": server.started_at, "max_upload_bytes": limit_bytes,
               "store": getattr(server.store, "url", type(server.store).__name__),
               "store_backlog": server.writer.backlog,
               # False while the server imports what its first job would (server.warmup)
               "warm": not server.warming()}
        if problem is not None:
            out["reason"] = problem
            return TandemJSONResponse(out, status_code=503)
        return out

    @app.get("/api/cluster", responses=_answers())
    def cluster() -> dict[str, Any]:
        return server.cluster_info()

    @app.put("/api/packages/{package_id}", response_model=PackageOut,
             responses=_answers(413, 422))
    async def put_package(
        request: Request,
        package_id: str = Path(..., pattern=r"^[0-9a-f]{16,64}$"),
    ) -> Any:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit_bytes:
            return err(413, server._too_large(int(declared)))
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit_bytes:
                return err(413, server._too_large(size))
            chunks.append(chunk)
        created = await run_in_threadpool(server.add_package, package_id, b"".join(chunks))
        return {"package_id": package_id, "created": created}

    return app
