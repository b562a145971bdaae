"""The model layer: a Model object that is trained, tuned, registered and served."""

from __future__ import annotations

# -- registry and serving (issue 14) --------------------------------------------------------
# (``serve`` is both the subpackage and the function: importing the function last makes
# ``tandem.model.serve`` the function, as the API says; ``from tandem.model.serve import X``
# still reaches the subpackage.)
from tandem.model.registry import ModelRef, alias, delete, get, put
from tandem.model.registry import list as list  # noqa: A004 - model.list, as the API says
from tandem.model.serve import ServeHandle, ServeSettings, serve

__all__ = ["ModelRef", "ServeHandle", "ServeSettings", "alias", "delete", "get", "list", "put",
           "serve"]
