"""``ray.train.backend``'s path: ``Backend`` and ``BackendConfig``, the plug-in interface of
a trainer's communication library (Ray's hooks ``on_start``, ``on_training_start``,
``on_shutdown`` are called, see :class:`Backend`)."""

from __future__ import annotations

from tandem.train.backends.base import Backend, BackendConfig

__all__ = ["Backend", "BackendConfig"]
