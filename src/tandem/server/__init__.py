"""The train server: the job service as a long-lived process with an HTTP API.

``tandem server start`` runs it as a daemon; ``python -m tandem.server`` runs it in the
foreground. ``TrainServer`` (``core.py``) owns the job service, the job store, the event
hub and the writer; ``create_app`` (``app.py``) puts the HTTP API, the event streams and
the dashboard in front of it. Clients live in ``tandem.jobs.client``.
"""

from __future__ import annotations

from typing import Any

from tandem.server.config import ServerConfig
from tandem.server.core import TrainServer

__all__ = ["ServerConfig", "TrainServer", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":  # FastAPI loads only when the HTTP app is wanted
        from tandem.server.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
