"""``put`` / ``get`` / ``list`` / ``alias`` / ``delete``: the model registry's user API.

Where the registry lives: with a train server configured (``tandem.init(address=...)`` or
``$TANDEM_ADDRESS``), the server's (its database and storage, over HTTP); otherwise a
local one under ``$TANDEM_MODELS_PATH`` (default ``~/.tandem/models``: ``registry.db`` and
the files; ``$TANDEM_MODELS_STORAGE`` may move the files to an fsspec URL such as
``s3://bucket/models``). Both are the same ``ModelStore`` code; the remote one runs it in
the server.
"""

from __future__ import annotations

import builtins
import getpass
import json
import os
import platform
import shutil
import socket
import sys
import tempfile
import threading
import time
import traceback
import types
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from tandem._core.errors import ConfigError
from tandem.model.registry._ref import ModelNotFoundError, ModelRef, RegistryError, check_name
from tandem.model.registry._store import ModelStore, VersionRecord

if TYPE_CHECKING:
    from tandem.model._model import Model

MODELS_PATH_ENV = "TANDEM_MODELS_PATH"
MODELS_STORAGE_ENV = "TANDEM_MODELS_STORAGE"


class RegistryBackend(Protocol):
    """What ``put``/``get``/... need from where the registry lives (``ModelStore`` locally or
    in the train server; ``RemoteRegistry`` over HTTP)."""

    def where(self) -> str: ...
    def add(self, name: str, src_dir: str, meta: dict[str, Any],
            version: int | None = None) -> VersionRecord: ...
    def resolve(self, ref: ModelRef | str) -> VersionRecord: ...
    def versions(self, name: str) -> builtins.list[VersionRecord]: ...
    def names(self) -> builtins.list[dict[str, Any]]: ...
    def set_alias(self, name: str, alias: str, version: int) -> VersionRecord: ...
    def delete(self, name: str, version: int) -> VersionRecord: ...
    def download(self, record: VersionRecord, dest: str) -> str: ...


_lock = threading.Lock()
_local: dict[tuple[str, str], ModelStore] = {}
_process_backend: RegistryBackend | None = None


def set_process_registry(backend: RegistryBackend | None) -> None:
    """The train server makes its own store the registry of its process."""
    global _process_backend
    _process_backend = backend


def local_registry(path: str | None = None, storage: str | None = None) -> ModelStore:
    """The local registry at ``path`` (default ``$TANDEM_MODELS_PATH`` or ``~/.tandem/models``)."""
    root = os.path.abspath(os.path.expanduser(
        path or os.environ.get(MODELS_PATH_ENV) or os.path.join("~", ".tandem", "models")))
    files = storage or os.environ.get(MODELS_STORAGE_ENV) or os.path.join(root, "files")
    with _lock:
        store = _local.get((root, files))
        if store is None:
            os.makedirs(root, exist_ok=True)
            store = ModelStore("sqlite:///" + os.path.join(root, "registry.db"), files)
            _local[(root, files)] = store
        return store


def registry() -> RegistryBackend:
    """The registry this process uses (see the module docstring)."""
    if _process_backend is not None:
        return _process_backend
    from tandem.jobs import runtime
    from tandem.jobs.client import ADDRESS_ENV, RemoteJobService, ServerConnection

    svc = runtime.current_service()
    if isinstance(svc, RemoteJobService) or (svc is None and os.environ.get(ADDRESS_ENV)):
        from tandem.model.registry._remote import RemoteRegistry

        if svc is None:
            svc = runtime.get_service()
        if not isinstance(svc, RemoteJobService):
            raise RuntimeError(f"{ADDRESS_ENV} is set, but the job service is {svc!r}")
        conn = svc.connection
        return RemoteRegistry(ServerConnection(conn.url, conn.token))
    return local_registry()


# --------------------------------------------------------------------------- put


def _model_base() -> type[Model]:
    from tandem.model._model import Model

    return Model


def _describe(x: Any) -> str:
    return f"{x!r} ({type(x).__module__}.{type(x).__qualname__})"[:300]


def _instance_from(x: Any, checkpoint: Any, config: Mapping[str, Any] | None
                   ) -> tuple[Model, dict[str, Any]]:
    """The model instance to store and the lineage found with it."""
    Model = _model_base()
    lineage: dict[str, Any] = {}
    metrics: dict[str, Any] = {}
    if checkpoint is not None:
        path = getattr(checkpoint, "path", checkpoint)
        lineage["checkpoint"] = str(path)
        m = Model.from_checkpoint(checkpoint)
        if x is not None and isinstance(x, type) and not isinstance(m, x):
            raise RegistryError(f"checkpoint {path!r} holds a {type(m).__qualname__}, not a "
                                f"{x.__qualname__}.")
    elif isinstance(x, type) and issubclass(x, Model):
        m = x(dict(config or {}))
    elif isinstance(x, Model):
        m = x
    elif hasattr(x, "job_id") and hasattr(x, "wait") and not isinstance(x, type):
        # model.train(..., block=False)'s handle: its result, and the job it ran as
        m, found = _instance_from(x.wait(), None, config)
        found["lineage"].setdefault("job_id", str(x.job_id))
        return m, found
    elif hasattr(x, "get_best_result") and hasattr(x, "num_terminated"):  # a ResultGrid
        return _instance_from(x.get_best_result(), None, config)
    elif hasattr(x, "checkpoint") and hasattr(x, "metrics") and hasattr(x, "path"):  # a Result
        if getattr(x, "error", None) is not None:
            raise RegistryError(f"the run at {x.path} failed ({type(x.error).__name__}: "
                                f"{x.error}); register a run that finished.")
        if x.checkpoint is None:
            raise RegistryError(
                f"the run at {x.path} has no checkpoint, so there are no trained weights to "
                f"register. Train with checkpoints (the model layer writes one per "
                f"checkpoint_every epochs), or pass checkpoint=PATH.")
        m = x.model if hasattr(x, "model") else Model.from_checkpoint(x.checkpoint)
        metrics = {k: v for k, v in dict(x.metrics or {}).items()
                   if isinstance(v, (int, float, str, bool)) or v is None}
        lineage["run_path"] = str(x.path)
        lineage["checkpoint"] = str(getattr(x.checkpoint, "path", x.checkpoint))
        for key in ("job_id", "trial_id"):
            value = getattr(x, key, None) or metrics.get(key)
            if value:
                lineage[key] = str(value)
    else:
        raise RegistryError(
            f"model.put takes a Model subclass, a Model instance, a training Result (or a "
            f"tune ResultGrid) or checkpoint=PATH; got {_describe(x)}. Subclass "
            f"tandem.model.Model (or TorchModel) and pass the class or a trained instance.")
    if config and not (isinstance(x, type) and checkpoint is None):
        raise ConfigError(
            "model.put(config=...) sets the config of a class registered untrained; a trained "
            "instance or result keeps the config its weights were trained with.")
    return m, {"lineage": lineage, "metrics": metrics}


def _check(m: Model) -> None:
    """Builds the model, runs setup() and, when declared, predict(example_input)."""
    step = "setup()"
    try:
        m.ensure_setup()
        example = getattr(m, "example_input", None)
        if callable(example):
            step = "example_input()"
            example = example()
        if example is not None:
            step = "predict(example_input)"
            m.predict(example)
    except Exception as e:
        tb = traceback.format_exc()
        raise RegistryError(
            f"{type(m).__qualname__} failed its check at put ({step} raised "
            f"{type(e).__name__}: {e}); nothing was stored.\n{tb}") from e


def _environment() -> dict[str, Any]:
    import tandem

    env: dict[str, Any] = {"python": platform.python_version(), "tandem": tandem.__version__,
                           "platform": sys.platform}
    for mod in ("torch", "numpy", "xgboost", "lightgbm", "sklearn", "cloudpickle"):
        m = sys.modules.get(mod)
        if m is not None:
            env[mod] = getattr(m, "__version__", "?")
    return env


def _as_modules(by_value: Iterable[Any] | None) -> builtins.list[types.ModuleType]:
    out = []
    for item in by_value or ():
        if isinstance(item, types.ModuleType):
            out.append(item)
        elif isinstance(item, str) and item in sys.modules:
            out.append(sys.modules[item])
        else:
            raise ConfigError(f"by_value={item!r}: give imported modules (or their names), "
                              f"e.g. by_value=[my_helpers].")
    return out


def put(
    x: Any = None,
    name: str | None = None,
    *,
    checkpoint: Any = None,
    config: Mapping[str, Any] | None = None,
    version: int | None = None,
    tags: Mapping[str, Any] | None = None,
    by_value: Iterable[Any] | None = None,
) -> ModelRef:
    """Registers a model version and returns its ``ModelRef``.

    Args:
        x: a Model subclass (stored with its initial weights), a trained instance, a
            training ``Result`` (its checkpoint's weights, metrics and run as lineage) or a
            tune ``ResultGrid`` (its best result).
        name: default: the class name.
        checkpoint: a checkpoint (or its path) written by the model layer, instead of ``x``.
        config: config overrides for a class.
        version: a version number to use instead of the next one.
        tags: free-form labels stored with the version.
        by_value: modules to pickle with the class (for helpers the puller does not have).

    Raises:
        RegistryError: ``x`` is not a model, or the model fails its check (it builds,
            ``setup()`` runs, ``predict(example_input)`` runs when declared). Nothing is
            stored then.
    """
    import cloudpickle

    if x is None and checkpoint is None:
        raise RegistryError("model.put needs a model: model.put(trained_model_or_result, "
                            "name='digits') or model.put(checkpoint=PATH, name='digits').")
    if tags is not None and not isinstance(tags, Mapping):
        raise ConfigError(f"tags must be a dict such as {{'team': 'vision'}}, got {tags!r}.")
    modules = _as_modules(by_value)
    m, found = _instance_from(x, checkpoint, config)
    name = check_name(name if name is not None else type(m).__name__)
    _check(m)
    registered = []
    for mod in modules:
        try:
            cloudpickle.register_pickle_by_value(mod)
            registered.append(mod)
        except ValueError:
            pass  # already by value
    tmp = tempfile.mkdtemp(prefix="tandem-put-")
    try:
        m.save(tmp)
        cls = type(m)
        meta = {
            "config": json.loads(json.dumps(m.config, default=repr)),
            "metrics": found["metrics"],
            "lineage": {**found["lineage"], "user": _user(), "host": socket.gethostname(),
                        "time": time.time()},
            "environment": _environment(),
            "model_class": {"module": cls.__module__, "qualname": cls.__qualname__,
                            "by_value": [mod.__name__ for mod in modules]},
            "tags": dict(tags or {}),
        }
        record = registry().add(name, tmp, meta, version=version)
    finally:
        for mod in registered:
            try:
                cloudpickle.unregister_pickle_by_value(mod)
            except ValueError:
                pass
        shutil.rmtree(tmp, ignore_errors=True)
    return record.ref


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in a container
        return str(os.getuid()) if hasattr(os, "getuid") else "?"


# --------------------------------------------------------------------------- get


def resolve(ref: ModelRef | str, version: int | str | None = None) -> VersionRecord:
    """The stored version ``ref`` (plus ``version``: a number or alias) names."""
    r = ModelRef.parse(ref)
    if version is not None:
        if r.version is not None or r.alias is not None:
            raise ConfigError(f"model.get({str(r)!r}, version={version!r}): the reference "
                              f"names a version already; give one or the other.")
        text = str(version)
        r = ModelRef(r.name, int(text)) if text.isdigit() else ModelRef(r.name, alias=text)
    return registry().resolve(r)


def load_model_dir(directory: str, what: str) -> Model:
    """``Model.load(directory)``, turning a missing module into an error that says what to do."""
    Model = _model_base()
    try:
        return Model.load(directory)
    except ModuleNotFoundError as e:
        mod = e.name or str(e)
        raise ModuleNotFoundError(
            f"{what} needs the module {mod!r}, which this process cannot import (the class "
            f"was pickled by reference to it). Install {mod!r} here, or register the model "
            f"again with model.put(..., by_value=[{mod.split('.')[0]}]) so its code travels "
            f"with the model.", name=e.name) from e


def get(ref: ModelRef | str, *, version: int | str | None = None,
        model_config: Mapping[str, Any] | None = None) -> Model:
    """A set-up instance of a registered version, holding its weights.

    ``ref``: ``"digits"`` (latest), ``"digits@3"``, ``"digits@prod"`` or a ``ModelRef``.
    ``model_config`` overrides config keys (the weights must still fit the network).

    Raises:
        ModelNotFoundError: no such name, version or alias (the message lists what exists).
        ModuleNotFoundError: the class needs a module this process lacks (says which).
    """
    record = resolve(ref, version)
    backend = registry()
    tmp = None
    try:
        if isinstance(backend, ModelStore) and "://" not in record.location:
            directory = record.location
        else:
            tmp = tempfile.mkdtemp(prefix="tandem-get-")
            directory = backend.download(record, tmp)
        m = load_model_dir(directory, str(record.ref))
        if model_config:
            m = type(m)({**m.config, **dict(model_config)})
            m.load_weights(directory)
        m.ensure_setup()
        return m
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def list(name: str | None = None) -> builtins.list[dict[str, Any]]:
    """Without ``name``: one dict per registered name (``name``, ``versions``, ``latest``,
    ``updated``, ``aliases``). With it: one dict per version (``version``, ``created``,
    ``config``, ``metrics``, ``lineage`` (run / job / trial, user, time), ``environment``,
    ``tags``, ``aliases``), oldest first."""
    backend = registry()
    if name is None:
        return backend.names()
    return [r.to_dict() for r in backend.versions(check_name(name))]


def alias(name: str, alias: str, version: int) -> ModelRef:
    """Points ``name@alias`` (e.g. ``prod``) at ``version``; moves it if it pointed elsewhere."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigError(f"model.alias({name!r}, {alias!r}, {version!r}): the version is a "
                          f"number, e.g. model.alias({name!r}, {alias!r}, 3).")
    return registry().set_alias(check_name(name), alias, version).ref


def delete(name: str, version: int) -> None:
    """Deletes one version (refused while an alias points at it: move the alias first; and
    while it is served: stop the serve job first)."""
    if isinstance(version, bool) or not isinstance(version, int):
        raise ConfigError(f"model.delete({name!r}, {version!r}): give the version number, "
                          f"e.g. model.delete({name!r}, 2).")
    check_not_served(check_name(name), version)  # a train server checks its own jobs
    registry().delete(name, version)


def check_not_served(name: str, version: int, service: Any = None) -> None:
    """Refuses to delete a version a live serve job of ``service`` (default: this
    process's embedded job service) serves: its replicas load the files again whenever
    one restarts.

    Raises:
        RegistryError: naming the serve job(s) and how to stop them.
    """
    if service is None:
        from tandem.jobs import runtime

        service = runtime.current_service()
    list_jobs = getattr(service, "list", None)
    if list_jobs is None or not callable(list_jobs):
        return
    what = f"{name}@{version}"
    busy = []
    for job in list_jobs():
        spec = getattr(job, "spec", None)
        meta = dict(getattr(spec, "metadata", None) or {})
        status = getattr(job, "status", None)
        if (meta.get("kind") == "serve" and meta.get("model") == what
                and not getattr(status, "is_terminal", True)):
            busy.append(job.job_id)
    if busy:
        ids = ", ".join(busy)
        raise RegistryError(
            f"version {version} of {name!r} is being served by job {ids}; a served version "
            f"stays until its serve job stops (its replicas load it again when one "
            f"restarts). Stop it first (`tandem jobs stop {busy[0]}`), then delete.")


__all__ = ["ModelNotFoundError", "ModelRef", "RegistryError", "alias", "check_not_served",
           "delete", "get", "list", "put", "registry", "resolve"]
