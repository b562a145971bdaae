"""tandem: training as the base layer, tuning built on top.

One job service (a gang scheduler, embedded by default) runs every training run; a
tuning trial is just a train job. ``import tandem`` is cheap: nothing starts until the
first ``fit()`` or an explicit ``tandem.init()``, and nothing is imported until a name is
used (``tandem._core.lazy``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tandem._core.lazy import lazy_exports

if TYPE_CHECKING:
    from tandem._core.extras import MissingExtraError, require_extras
    from tandem._init import init, is_initialized, shutdown

__version__ = "0.1.0"
__all__ = ["MissingExtraError", "__version__", "init", "is_initialized", "require_extras",
           "shutdown"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), {
    "MissingExtraError": "tandem._core.extras",
    "require_extras": "tandem._core.extras",
    "init": "tandem._init",
    "is_initialized": "tandem._init",
    "shutdown": "tandem._init",
})
