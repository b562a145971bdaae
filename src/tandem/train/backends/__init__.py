"""Backends set up the communication library of a worker gang (e.g. torch.distributed)."""

from tandem.train.backends.base import Backend, BackendConfig

__all__ = ["Backend", "BackendConfig"]
