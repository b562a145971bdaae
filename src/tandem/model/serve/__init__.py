"""Serving a model over HTTP as a long-running job: ``serve``, ``ServeHandle``, ``ServeSettings``."""

from __future__ import annotations

from tandem.model.serve._api import ServeHandle, serve
from tandem.model.serve._runner import ServeError, ServeRunner
from tandem.model.serve._settings import ServeSettings

__all__ = ["ServeError", "ServeHandle", "ServeRunner", "ServeSettings", "serve"]
