"""Finding the train server: its address and token (argument, environment, or the local
server's ``~/.tandem/server.json``)."""

from __future__ import annotations

import json
import os
from typing import Any

from tandem._core.errors import ConfigError
from tandem._core.records import record

DEFAULT_PORT = 8267
ADDRESS_ENV = "TANDEM_ADDRESS"
TOKEN_ENV = "TANDEM_TOKEN"
#: ``tandem submit`` sets these for the script it runs.
PRIORITY_ENV = "TANDEM_JOB_PRIORITY"
TAGS_ENV = "TANDEM_JOB_TAGS"
SUBMIT_RECORD_ENV = "TANDEM_SUBMIT_RECORD"
#: ``TANDEM_ADDRESS=local``: jobs run in this process even when a local server runs.
LOCAL = "local"


def env_address() -> str | None:
    """``$TANDEM_ADDRESS`` when it names a server; None when unset, empty or ``local``."""
    value = os.environ.get(ADDRESS_ENV, "").strip()
    return None if not value or value.lower() == LOCAL else value


def wants_embedded() -> bool:
    """``TANDEM_ADDRESS=local``: run jobs in this process, never on a server."""
    return os.environ.get(ADDRESS_ENV, "").strip().lower() == LOCAL


@record
class LocalServer:
    """The train server running on this machine (``~/.tandem/server.json``, answering)."""

    url: str
    token: str | None


def find_local_server(timeout_s: float = 1.0) -> LocalServer | None:
    """The server named in ``~/.tandem/server.json`` if it answers ``/api/health`` with its
    token within ``timeout_s``; None when there is no such file or nothing answers there
    (a server that was killed leaves its file behind). Needs only the standard library."""
    info = read_server_file()
    if not info or not info.get("address"):
        return None
    try:
        url = normalize_address(str(info["address"]))
    except ConfigError:
        return None
    token = str(info["token"]) if info.get("token") else None
    # here, not at import: only a machine with a server file pays for them (~40 ms)
    import ssl
    import urllib.error
    import urllib.request

    context = None
    if url.startswith("https://"):
        cert = info.get("tls_cert")
        try:
            context = ssl.create_default_context(cafile=cert if isinstance(cert, str) else None)
        except (OSError, ssl.SSLError):
            return None
    request = urllib.request.Request(f"{url}/api/health",
                                     headers={"Authorization": f"Bearer {token or ''}"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as r:
            body = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        if e.code != 503:  # 503: it answers, its store is recovering
            return None
        body = {}
    except (OSError, ValueError):
        return None
    if not isinstance(body, dict):
        return None
    return LocalServer(url, token)


def server_file_path() -> str:
    """``~/.tandem/server.json``: where a local server writes its address and token."""
    return os.path.join(os.path.expanduser("~"), ".tandem", "server.json")


def read_server_file() -> dict[str, Any] | None:
    try:
        with open(server_file_path()) as f:
            info = json.load(f)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def normalize_address(address: str) -> str:
    """``host:port``, ``http://host:port`` or ``host`` -> ``http://host:port``."""
    text = address.strip().rstrip("/")
    if not text:
        raise ConfigError("The train server address is empty; give host:port, e.g. 127.0.0.1:8267.")
    if "://" not in text:
        text = "http://" + text
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"The train server address {address!r} is not valid; give host:port "
            f"(e.g. 127.0.0.1:8267) or http://host:port."
        )
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as e:
        raise ConfigError(f"The train server address {address!r} has a bad port: {e}.") from e
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


def _same_server(a: str, b: str) -> bool:
    from urllib.parse import urlsplit

    local = {"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"}
    pa, pb = urlsplit(a), urlsplit(b)
    if pa.port != pb.port:
        return False
    return pa.hostname == pb.hostname or (pa.hostname in local and pb.hostname in local)


def resolve_connection(address: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server URL and token to use.

    ``address``: given, else ``$TANDEM_ADDRESS``; ``"auto"`` means the local server named in
    ``~/.tandem/server.json``. ``token``: given, else ``$TANDEM_TOKEN``, else the token in
    ``~/.tandem/server.json`` when its address is the same server.
    """
    address = address or env_address()
    if address is not None and address.strip().lower() == LOCAL:
        raise ConfigError(
            f"address={address!r} means \"run in this process\"; this needs a train server: "
            f"give host:port, or leave it out for the local server (~/.tandem/server.json)."
        )
    info = read_server_file()
    if address is None or address == "auto":
        if info is None or "address" not in info:
            state = ("is damaged: not the JSON a server writes" if os.path.exists(
                server_file_path()) else "is missing")
            raise ConfigError(
                f"No train server address given and no local server found ({server_file_path()} "
                f"{state}). Start one with `tandem server start`, or set {ADDRESS_ENV}=host:port."
            )
        address = str(info["address"])
    url = normalize_address(address)
    token = token or os.environ.get(TOKEN_ENV) or None
    if token is None and info is not None and info.get("token") and _same_server(
        url, normalize_address(str(info.get("address", "")))
    ):
        token = str(info["token"])
    return url, token
