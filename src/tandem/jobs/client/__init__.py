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
