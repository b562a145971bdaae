"""Ray's ``ray.train.horovod`` path: ``HorovodTrainer`` and ``HorovodConfig`` raise
``HorovodUnavailableError``, which says why Horovod is not available in tandem (it does not
build against torch 2.13) and what to use instead (``TorchTrainer``)."""

from __future__ import annotations

from tandem.train.backends.horovod import HorovodConfig, HorovodUnavailableError, unavailable


class HorovodTrainer:
    """Ray's ``HorovodTrainer``; raises ``HorovodUnavailableError`` when built."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        unavailable("HorovodTrainer")


__all__ = ["HorovodConfig", "HorovodTrainer", "HorovodUnavailableError"]
