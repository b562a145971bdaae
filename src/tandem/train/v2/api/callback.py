"""``ray.train.v2.api.callback``: ``UserCallback`` (``after_report``, ``after_exception``) and
``RayTrainCallback``, the base of run callbacks (tandem's ``tandem.train.Callback``)."""

from __future__ import annotations

from tandem.train.api.callback import RayTrainCallback, UserCallback

__all__ = ["RayTrainCallback", "UserCallback"]
