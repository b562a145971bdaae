"""``RemoteJobService``: the job service of a train server, spoken to over HTTP.

``get_service()`` returns one when ``TANDEM_ADDRESS`` is set or ``tandem.init(address=...)``
was called, so ``trainer.fit()`` submits to the server with no other code change. It meets
the job contract (``tandem.jobs.contract.JobService``); its ``RemoteJob`` is a ``JobView``
fed by following the job's server-sent event stream on a background thread.

What travels: the ``JobSpec`` cloudpickled without its ``listener`` (the listener stays in
this process and is driven from the event stream). ``runtime_env={"working_dir": ...}``
uploads a folder (``.gitignore`` honoured, size-limited by the server) so that the
user's own modules import on the server.

The parts, one module each:

- ``discovery``: the server's address and token (argument, environment, ``~/.tandem``);
- ``connection``: HTTP requests with clear errors, and the event-stream parser;
- ``errors``: the exception of each HTTP error status (``NotFound``, ``Conflict``, ...);
- ``packaging``: ``runtime_env`` checks and the ``working_dir`` zip;
- ``remote``: ``RemoteJobService`` and ``RemoteJob``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem.jobs.client.connection import ServerConnection, ServerUnavailableError, parse_sse
    from tandem.jobs.client.discovery import (
        ADDRESS_ENV,
        DEFAULT_PORT,
        PRIORITY_ENV,
        SUBMIT_RECORD_ENV,
        TAGS_ENV,
        TOKEN_ENV,
        normalize_address,
        read_server_file,
        resolve_connection,
        server_file_path,
    )
    from tandem.jobs.client.errors import (
        BadRequest,
        Conflict,
        Forbidden,
        NotFound,
        PayloadTooLarge,
        ServerHTTPError,
        ServerInternalError,
        ServiceUnavailable,
        TooManyRequests,
        Unauthorized,
        UnprocessableEntity,
    )
    from tandem.jobs.client.packaging import check_runtime_env, package_working_dir
    from tandem.jobs.client.remote import RemoteJob, RemoteJobService

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_PORT",
    "PRIORITY_ENV",
    "SUBMIT_RECORD_ENV",
    "TAGS_ENV",
    "TOKEN_ENV",
    "BadRequest",
    "Conflict",
    "Forbidden",
    "NotFound",
    "PayloadTooLarge",
    "RemoteJob",
    "RemoteJobService",
    "ServerHTTPError",
    "ServerInternalError",
    "ServiceUnavailable",
    "TooManyRequests",
    "Unauthorized",
    "UnprocessableEntity",
    "ServerConnection",
    "ServerUnavailableError",
    "check_runtime_env",
    "normalize_address",
    "package_working_dir",
    "parse_sse",
    "read_server_file",
    "resolve_connection",
    "server_file_path",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "ServerConnection": "tandem.jobs.client.connection",
    "ServerUnavailableError": "tandem.jobs.client.connection",
    "parse_sse": "tandem.jobs.client.connection",
    "ADDRESS_ENV": "tandem.jobs.client.discovery",
    "DEFAULT_PORT": "tandem.jobs.client.discovery",
    "PRIORITY_ENV": "tandem.jobs.client.discovery",
    "SUBMIT_RECORD_ENV": "tandem.jobs.client.discovery",
    "TAGS_ENV": "tandem.jobs.client.discovery",
    "TOKEN_ENV": "tandem.jobs.client.discovery",
    "normalize_address": "tandem.jobs.client.discovery",
    "read_server_file": "tandem.jobs.client.discovery",
    "resolve_connection": "tandem.jobs.client.discovery",
    "server_file_path": "tandem.jobs.client.discovery",
    "BadRequest": "tandem.jobs.client.errors",
    "Conflict": "tandem.jobs.client.errors",
    "Forbidden": "tandem.jobs.client.errors",
    "NotFound": "tandem.jobs.client.errors",
    "PayloadTooLarge": "tandem.jobs.client.errors",
    "ServerHTTPError": "tandem.jobs.client.errors",
    "ServerInternalError": "tandem.jobs.client.errors",
    "ServiceUnavailable": "tandem.jobs.client.errors",
    "TooManyRequests": "tandem.jobs.client.errors",
    "Unauthorized": "tandem.jobs.client.errors",
    "UnprocessableEntity": "tandem.jobs.client.errors",
    "check_runtime_env": "tandem.jobs.client.packaging",
    "package_working_dir": "tandem.jobs.client.packaging",
    "RemoteJob": "tandem.jobs.client.remote",
    "RemoteJobService": "tandem.jobs.client.remote",
})
