"""The model registry: versions of a model (class by value, config, weights, lineage)."""

from __future__ import annotations

from tandem.model.registry._api import (
    RegistryBackend,
    alias,
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
from tandem.model.registry._store import ModelStore, VersionRecord

__all__ = [
    "ModelNotFoundError",
    "ModelRef",
    "ModelStore",
    "RegistryBackend",
    "RegistryError",
    "VersionRecord",
    "alias",
    "delete",
    "get",
    "list",
    "local_registry",
    "put",
    "registry",
    "resolve",
    "set_process_registry",
]
