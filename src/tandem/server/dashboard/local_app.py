"""``tandem dashboard PATH``: the dashboard over results on disk, without a train server.

Serves the experiments and runs found under the given folders (``~/tandem_results`` by
default) on a loopback port. It is read-only, and behind the same login as the server's
dashboard: a fresh token per start, handed to the browser in the login link's fragment.
"""

from __future__ import annotations

import os
from typing import Any, cast

from tandem.server.dashboard.gate import DashboardGate
from tandem.server.dashboard.ondisk import ResultsIndex
from tandem.server.dashboard.routes import _JSON, disk_router, page_response


def check_paths(paths: list[str]) -> list[str]:
    """Absolute folders; a path that is not a folder is refused with what to do."""
    out = []
    for p in paths:
        full = os.path.abspath(os.path.expanduser(p))
        if not os.path.isdir(full):
            from tandem._core.errors import ConfigError

            raise ConfigError(
                f"{p!r} is not a folder. Give the folder that holds your experiments and runs "
                f"(RunConfig(storage_path=...), ~/tandem_results by default), or one "
                f"experiment's or run's folder.")
        out.append(full)
    return out


def local_app(paths: list[str], token: str) -> Any:
    """The ASGI app: the page plus the experiments/runs routes, behind the login gate."""
    from fastapi import FastAPI

    from tandem import __version__
    from tandem.server.auth import TokenAuth

    app = FastAPI(title="tandem dashboard (results on disk)", version=__version__,
                  docs_url=None, redoc_url=None, openapi_url=None)
    index = ResultsIndex(paths)

    @app.get("/", include_in_schema=False)
    def page() -> Any:
        return page_response()

    @app.get("/api/dashboard/summary", include_in_schema=False)
    def summary() -> Any:
        return _JSON({"mode": "disk", "version": __version__, "paths": paths, "login": True,
                      "models": False})

    app.include_router(disk_router(index))
    return DashboardGate(TokenAuth(cast(Any, app), token), token)
