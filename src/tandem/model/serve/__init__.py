"""Serving a model over HTTP as a long-running job: ``serve``, ``ServeHandle``, ``ServeSettings``.

``ServeRunner`` (the job's runner, with the HTTP front and the cluster behind it) is
imported on first use: ``import tandem.model`` and a serving replica never need it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports
from tandem.model.serve._api import ServeHandle, serve
from tandem.model.serve._errors import ServeError
from tandem.model.serve._settings import ServeSettings

if TYPE_CHECKING:
    from tandem.model.serve._runner import ServeRunner

__getattr__, __dir__ = lazy_exports(__name__, globals(), {"ServeRunner": "._runner"})

__all__ = ["ServeError", "ServeHandle", "ServeRunner", "ServeSettings", "serve"]
