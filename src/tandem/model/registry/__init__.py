"""The model registry: versions of a model (class by value, config, weights, lineage)."""

from __future__ import annotations

from typing import Any

from tandem.model.registry._api import (
    RegistryBackend,
    alias,
    check_not_served,
    delete,
    get,
    list,
    local_registry,
    put,
    registry,
    resolve,
    set_process_registry,
)
from tandem.model.registry._ref import ModelNotFoundError, ModelRef, RegistryError

_STORE_NAMES = ("ModelStore", "VersionRecord", "unpack_to")


def __getattr__(name: str) -> Any:
    if name == "VersionRecord":  # (no sqlalchemy: the stdlib reader's record)
        from tandem.model.registry._record import VersionRecord

        return VersionRecord
    if name in _STORE_NAMES:  # sqlalchemy: imported on first use, not with tandem.model
        from tandem.model.registry import _store

        return getattr(_store, name)
    if name == "RemoteRegistry":  # the train server's registry (imports the HTTP client)
        from tandem.model.registry._remote import RemoteRegistry

        return RemoteRegistry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ModelNotFoundError",
    "ModelRef",
    "ModelStore",
    "RegistryBackend",
    "RegistryError",
    "RemoteRegistry",
    "VersionRecord",
    "alias",
    "check_not_served",
    "delete",
    "get",
    "list",
    "local_registry",
    "put",
    "registry",
    "resolve",
    "set_process_registry",
    "unpack_to",
]
