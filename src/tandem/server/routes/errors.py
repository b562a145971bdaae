"""The train server's answers to errors raised by its routes (4xx and 503, never 500)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response

from tandem._core.errors import ConfigError, JobNotFoundError, ResourcesUnavailableError
from tandem.jobs.store import JobStoreError
from tandem.model.registry import ModelNotFoundError, RegistryError
from tandem.server.core import (
    OwnerMismatchError,
    PayloadError,
    RunFolderBusyError,
    SpecError,
    UploadTooLargeError,
)
from tandem.server.routes.common import _finite, err


def install_error_handlers(app: FastAPI) -> None:
    """The status code and detail each error of the routes is answered with."""

    @app.exception_handler(JobNotFoundError)
    async def _not_found(_: Request, e: JobNotFoundError) -> Response:
        return err(404, str(e))

    @app.exception_handler(UploadTooLargeError)
    async def _too_large(_: Request, e: UploadTooLargeError) -> Response:
        return err(413, str(e))

    @app.exception_handler(PayloadError)
    async def _payload(_: Request, e: PayloadError) -> Response:
        return err(422, [{"loc": ["body", "payload"], "msg": str(e), "type": "payload_error"}])

    @app.exception_handler(SpecError)
    async def _spec(_: Request, e: SpecError) -> Response:
        loc = list(e.loc) if e.loc and e.loc[0] == "body" else ["body", *e.loc]
        return err(422, [{"loc": loc, "msg": str(e), "type": "value_error"}])

    @app.exception_handler(OwnerMismatchError)
    async def _owner(_: Request, e: OwnerMismatchError) -> Response:
        return err(403, str(e))

    @app.exception_handler(RunFolderBusyError)
    async def _busy(_: Request, e: RunFolderBusyError) -> Response:
        return err(409, str(e))

    @app.exception_handler(ModelNotFoundError)
    async def _no_model(_: Request, e: ModelNotFoundError) -> Response:
        return err(404, str(e))  # the detail lists what exists

    @app.exception_handler(RegistryError)
    async def _registry(_: Request, e: RegistryError) -> Response:
        return err(409, str(e))  # e.g. deleting a version an alias points at, or one served

    @app.exception_handler(JobStoreError)
    async def _store(_: Request, e: JobStoreError) -> Response:
        return err(503, f"{e} The request was not carried out; try again once the store "
                        f"answers (GET /api/health says when).")

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, e: RequestValidationError) -> Response:
        errors = []
        for d in e.errors():
            d = {k: v for k, v in d.items() if k in ("loc", "msg", "type", "input")}
            errors.append(_finite(d))
        return err(422, errors)

    @app.exception_handler(RecursionError)
    async def _too_deep(_: Request, e: RecursionError) -> Response:
        # Deeply nested JSON exhausts Python's recursion while it is read, checked or
        # written back: the client's input, not a server fault (the connection stays up).
        return err(400, "the request is nested too deeply for this server to read; send "
                        "JSON nested at most a few dozen levels.")

    @app.exception_handler(ConfigError)
    async def _config(_: Request, e: ConfigError) -> Response:
        return err(422, str(e))

    @app.exception_handler(ResourcesUnavailableError)
    async def _resources(_: Request, e: ResourcesUnavailableError) -> Response:
        return err(422, str(e))
