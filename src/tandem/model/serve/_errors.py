"""``ServeError`` (its own module: ``model.serve``'s caller needs it without the runner)."""

from __future__ import annotations

from tandem._core.errors import TandemError


class ServeError(TandemError, RuntimeError):
    """A served model could not start (its replicas fail to load it, or its port is taken)."""
