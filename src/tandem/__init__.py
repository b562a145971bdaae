"""tandem: training as the base layer, tuning built on top.

One job service (a gang scheduler, embedded by default) runs every training run; a
tuning trial is just a train job. ``import tandem`` is cheap: nothing starts until the
first ``fit()`` or an explicit ``tandem.init()``.
"""

from __future__ import annotations

from tandem._core.extras import MissingExtraError, require_extras
from tandem._init import init, is_initialized, shutdown

__version__ = "0.1.0"
__all__ = ["MissingExtraError", "__version__", "init", "is_initialized", "require_extras",
           "shutdown"]
