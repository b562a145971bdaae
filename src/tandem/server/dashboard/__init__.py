"""The dashboard: jobs, a job, the cluster, experiments, models (see docs/dashboard.md).

``mount(app, server)`` adds its routes to the train server's app; ``DashboardGate`` is the
login / cookie / CSRF layer in front of the token check; ``local_app(paths)`` serves
results on disk without a server (``tandem dashboard PATH``). Everything the page needs
(HTML, script, styles, the uPlot charting library) is in ``static/``.
"""

from __future__ import annotations

from tandem.server.dashboard.gate import DashboardGate
from tandem.server.dashboard.routes import mount

__all__ = ["DashboardGate", "mount"]
