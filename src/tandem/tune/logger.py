"""``ray.tune.logger``'s path: ``LoggerCallback`` (the base of experiment loggers) and the
TensorBoard logger callback.

Every trial writes ``result.json`` and ``progress.csv`` anyway (what Ray's
``JsonLoggerCallback`` and ``CSVLoggerCallback`` add), so only ``TBXLoggerCallback`` is here.
"""

from __future__ import annotations

from tandem.tune.callback import LoggerCallback, TBXLoggerCallback

__all__ = ["LoggerCallback", "TBXLoggerCallback"]
