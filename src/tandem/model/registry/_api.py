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
import dataclasses
import functools
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from tandem._core.errors import ConfigError
from tandem.model._files import META_FILE, PICKLE_FILE, TRAINING_STATE_FILES, pickled_by_value
from tandem.model.registry._ref import ModelNotFoundError, ModelRef, RegistryError, check_name

if TYPE_CHECKING:  # (tandem.train is imported on use: a serving replica never needs it)
    from tandem.jobs.handle import JobHandle
    from tandem.model._model import Model
    from tandem.model._result import ModelJobHandle
    from tandem.model.registry._record import VersionRecord
    from tandem.model.registry._store import ModelStore
    from tandem.train import Checkpoint, Result
    from tandem.tune import ResultGrid

MODELS_PATH_ENV = "TANDEM_MODELS_PATH"
MODELS_STORAGE_ENV = "TANDEM_MODELS_STORAGE"


class RegistryBackend(Protocol):
    """What ``put``/``get``/... need from where the registry lives (``ModelStore`` locally or
    in the train server; ``RemoteRegistry`` over HTTP)."""

    def where(self) -> str: ...
    def add(self, name: str, src_dir: str, meta: dict[str, object],
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


def _local_paths(path: str | None = None, storage: str | None = None) -> tuple[str, str]:
    """The local registry's folder (its ``registry.db``) and where its files go."""
    root = os.path.abspath(os.path.expanduser(
        path or os.environ.get(MODELS_PATH_ENV) or os.path.join("~", ".tandem", "models")))
    return root, storage or os.environ.get(MODELS_STORAGE_ENV) or os.path.join(root, "files")


def local_registry(path: str | None = None, storage: str | None = None) -> ModelStore:
    """The local registry at ``path`` (default ``$TANDEM_MODELS_PATH`` or ``~/.tandem/models``)."""
    root, files = _local_paths(path, storage)
    with _lock:
        store = _local.get((root, files))
        if store is None:
            os.makedirs(root, exist_ok=True)
            # sqlalchemy, imported on the registry's first use, not by ``import tandem.model``
            from tandem.model.registry._store import ModelStore

            store = ModelStore("sqlite:///" + os.path.join(root, "registry.db"), files)
            _local[(root, files)] = store
        return store


def local_model_dirs(ref: ModelRef | str) -> builtins.list[str]:
    """The saved-model folders of ``ref``'s name in this process's local registry, newest
    first, found on disk without opening the registry's database (no SQL import): a hint
    for what to start importing while the lookup runs (``model.serve``). Empty for a train
    server's registry, remote storage, or a name not stored here."""
    try:
        name = ModelRef.parse(ref).name
    except Exception:  # noqa: BLE001 - a hint only; resolve() reports a bad reference
        return []
    if _process_backend is not None or "://" in os.environ.get(MODELS_STORAGE_ENV, ""):
        return []
    root = os.path.abspath(os.path.expanduser(
        os.environ.get(MODELS_PATH_ENV) or os.path.join("~", ".tandem", "models")))
    folder = os.path.join(os.environ.get(MODELS_STORAGE_ENV) or os.path.join(root, "files"),
                          name)
    try:
        found = [e for e in os.scandir(folder) if e.is_dir()]
        found.sort(key=lambda e: e.stat().st_mtime, reverse=True)
    except OSError:
        return []
    return [e.path for e in found]


def _uses_server() -> bool:
    """Whether this process's registry is a train server's (over HTTP)."""
    from tandem.jobs import runtime
    from tandem.jobs.client import RemoteJobService
    from tandem.jobs.client.discovery import env_address

    svc = runtime.current_service()
    # (TANDEM_ADDRESS=local names no server: the local registry, as for an unset one)
    return isinstance(svc, RemoteJobService) or (svc is None and env_address() is not None)


def registry() -> RegistryBackend:
    """The registry this process uses (see the module docstring)."""
    if _process_backend is not None:
        return _process_backend
    from tandem.jobs import runtime
    from tandem.jobs.client import ADDRESS_ENV, RemoteJobService, ServerConnection

    if _uses_server():
        svc = runtime.current_service()
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


def _describe(x: object) -> str:
    return f"{x!r} ({type(x).__module__}.{type(x).__qualname__})"[:300]


@dataclass(frozen=True)
class _Found:
    """What ``put`` stores, and the metrics and lineage found with it."""

    metrics: Mapping[str, Any] = field(default_factory=dict)
    lineage: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Instance(_Found):
    """A model instance (or a class, built with its config): ``put`` checks it, then
    ``save()``s it."""

    model: Any = None  # a tandem.model.Model


@dataclass(frozen=True)
class _Saved(_Found):
    """A training checkpoint holding a ``Model.save()`` directory: ``put`` adopts its
    saved-model files as they are (never loading them: the run built and trained the
    class); the files that only resume training stay behind."""

    checkpoint: Checkpoint | None = None


_Source = _Instance | _Saved


def _with_lineage(found: _Source, **more: str) -> _Source:
    return dataclasses.replace(found, lineage={**more, **found.lineage})


@functools.singledispatch
def _source(x: object) -> _Source:
    """What ``put(x)`` stores, by the type of ``x`` (the registrations below)."""
    raise RegistryError(
        f"model.put takes a Model subclass, a Model instance, a training Result (or a "
        f"tune ResultGrid, or the handle of model.train(block=False)) or checkpoint=PATH; "
        f"got {_describe(x)}. Subclass tandem.model.Model (or TorchModel) and pass the "
        f"class or a trained instance.")


@_source.register
def _(x: type) -> _Source:
    if not issubclass(x, _model_base()):
        return _source.dispatch(object)(x)
    return _Instance(model=x)  # built with put's config


def _from_handle(x: JobHandle | ModelJobHandle) -> _Source:
    return _with_lineage(_source(x.wait()), job_id=str(x.job_id))


def _from_grid(x: ResultGrid) -> _Source:
    return _source(x.get_best_result())


def _from_result(x: Result) -> _Source:
    if x.error is not None:
        raise RegistryError(f"the run at {x.path} failed ({type(x.error).__name__}: "
                            f"{x.error}); register a run that finished.")
    if x.checkpoint is None:
        raise RegistryError(
            f"the run at {x.path} has no checkpoint, so there are no trained weights to "
            f"register. Train with checkpoints (the model layer writes one per "
            f"checkpoint_every epochs), or pass checkpoint=PATH.")
    metrics = {k: v for k, v in dict(x.metrics or {}).items()
               if isinstance(v, (int, float, str, bool)) or v is None}
    lineage = {"run_path": str(x.path), "checkpoint": str(x.checkpoint.path)}
    for key in ("job_id", "trial_id"):
        value = getattr(x, key, None) or metrics.get(key)
        if value:
            lineage[key] = str(value)
    return _Saved(checkpoint=x.checkpoint, metrics=metrics, lineage=lineage)


@functools.cache
def _register_types() -> None:
    """The types of the layers above the registry's import, registered on first use (so
    importing the registry imports neither the Model classes nor tune)."""
    from tandem.jobs.handle import JobHandle
    from tandem.model._result import ModelJobHandle
    from tandem.train import Result
    from tandem.tune import ResultGrid

    _source.register(_model_base(), lambda x: _Instance(model=x))
    _source.register(Result, _from_result)
    _source.register(JobHandle, _from_handle)
    _source.register(ModelJobHandle, _from_handle)
    _source.register(ResultGrid, _from_grid)


def _resolve_source(x: object, checkpoint: object, config: Mapping[str, object] | None) -> _Source:
    """``put``'s arguments -> what to store."""
    _register_types()
    if checkpoint is not None:
        if x is not None and not isinstance(x, type):
            raise ConfigError(
                f"model.put(x, checkpoint=...): with a checkpoint, x may only be the Model "
                f"class it must hold; got {_describe(x)}. Pass one or the other.")
        ckpt = _as_checkpoint(checkpoint)
        found: _Source = _Saved(checkpoint=ckpt, lineage={"checkpoint": str(ckpt.path)})
    else:
        found = _source(x)
    if config and not (isinstance(found, _Instance) and isinstance(x, type)):
        raise ConfigError(
            "model.put(config=...) sets the config of a class registered untrained; a trained "
            "instance or result keeps the config its weights were trained with.")
    if isinstance(found, _Instance) and isinstance(found.model, type):
        found = dataclasses.replace(found, model=found.model(dict(config or {})))
    return found


def _as_checkpoint(checkpoint: object) -> Checkpoint:
    from tandem.train import Checkpoint

    if isinstance(checkpoint, Checkpoint):
        return checkpoint
    if isinstance(checkpoint, (str, os.PathLike)):
        path = os.fspath(checkpoint)
        return Checkpoint(path if "://" in path else os.path.abspath(path))
    raise ConfigError(f"checkpoint={checkpoint!r}: give a tandem.train.Checkpoint or its path "
                      f"(a folder written by model.train, local or an fsspec URL).")


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


def _environment() -> dict[str, object]:
    import tandem

    env: dict[str, Any] = {"python": platform.python_version(), "tandem": tandem.__version__,
                           "platform": sys.platform}
    for mod in ("torch", "numpy", "xgboost", "lightgbm", "sklearn", "cloudpickle"):
        m = sys.modules.get(mod)
        if m is not None:
            env[mod] = getattr(m, "__version__", "?")
    return env


def _as_modules(by_value: Iterable[object] | None) -> builtins.list[types.ModuleType]:
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


@dataclass(frozen=True)
class _Staged:
    """A folder of files to store, and who the model is."""

    directory: str
    module: str
    qualname: str
    config: Any


def _stage_instance(m: Model, tmp: str) -> _Staged:
    _check(m)
    m.save(tmp)
    cls = type(m)
    return _Staged(tmp, cls.__module__, cls.__qualname__,
                   json.loads(json.dumps(m.config, default=repr)))


def _stage_saved(ckpt: Checkpoint, expected: type | None, rewrite_pickle: bool,
                 tmp: str) -> _Staged:
    """Links (or copies) the checkpoint's saved-model files into ``tmp``, byte for byte.
    The class is read from ``tandem_model.json``; ``model.pkl`` is unpickled (the class,
    not the model) only to check it against ``expected`` when the names differ, or to
    pickle it again with ``by_value`` modules."""
    with ckpt.as_directory() as src:
        names = sorted(os.listdir(src))
        missing = [f for f in (PICKLE_FILE, META_FILE) if f not in names]
        if missing:
            raise RegistryError(
                f"checkpoint {ckpt.path!r} is not a saved model (it has no "
                f"{' or '.join(missing)}; it holds {names[:12]}). Register a checkpoint "
                f"written by model.train, or a trained Model instance.")
        with open(os.path.join(src, META_FILE)) as f:
            ident = json.load(f)
        module, qualname = str(ident.get("module")), str(ident.get("class"))
        klass: type | None = None
        if expected is not None and (expected.__module__, expected.__qualname__) != (
                module, qualname):
            klass = _pickled_state(src)["cls"]
            if not (isinstance(klass, type) and issubclass(klass, expected)):
                raise RegistryError(
                    f"checkpoint {ckpt.path!r} holds a {qualname}, not a "
                    f"{expected.__qualname__}.")
        for name in names:
            if name in TRAINING_STATE_FILES:
                continue
            _link_or_copy(os.path.join(src, name), os.path.join(tmp, name))
        if rewrite_pickle:  # by_value modules travel inside model.pkl
            import cloudpickle

            state = _pickled_state(src)
            os.unlink(os.path.join(tmp, PICKLE_FILE))
            with pickled_by_value(state["cls"]):
                blob = cloudpickle.dumps(state)
            with open(os.path.join(tmp, PICKLE_FILE), "wb") as out:
                out.write(blob)
    return _Staged(tmp, module, qualname, ident.get("config") or {})


def _pickled_state(directory: str) -> dict[str, Any]:
    import cloudpickle

    with open(os.path.join(directory, PICKLE_FILE), "rb") as f:
        state: dict[str, Any] = cloudpickle.load(f)
    return state


def _link_or_copy(src: str, dst: str) -> None:
    if os.path.isdir(src):
        shutil.copytree(src, dst)
        return
    try:
        os.link(src, dst)
    except OSError:  # another filesystem, or no hard links there
        shutil.copy2(src, dst)


def put(
    x: object = None,
    name: str | None = None,
    *,
    checkpoint: object = None,
    config: Mapping[str, object] | None = None,
    version: int | None = None,
    tags: Mapping[str, object] | None = None,
    by_value: Iterable[object] | None = None,
) -> ModelRef:
    """Registers a model version and returns its ``ModelRef``.

    Args:
        x: a Model subclass (stored with its initial weights), a trained instance, a
            training ``Result`` (its checkpoint's saved-model files, adopted as they are,
            its metrics and run as lineage), a tune ``ResultGrid`` (its best result) or
            ``model.train(block=False)``'s handle (its result, once the run ends).
        name: default: the class name.
        checkpoint: a checkpoint (or its path) written by the model layer, instead of ``x``
            (``x`` may then be the class it must hold).
        config: config overrides for a class.
        version: a version number to use instead of the next one.
        tags: free-form labels stored with the version.
        by_value: modules to pickle with the class (for helpers the puller does not have).

    Raises:
        RegistryError: ``x`` is not a model, or a model given as a class or instance fails
            its check (it builds, ``setup()`` runs, ``predict(example_input)`` runs when
            declared), or a checkpoint holds no saved model. Nothing is stored then. A
            checkpoint's files are stored without being loaded: its run built the class.
    """
    import cloudpickle

    if x is None and checkpoint is None:
        raise RegistryError("model.put needs a model: model.put(trained_model_or_result, "
                            "name='digits') or model.put(checkpoint=PATH, name='digits').")
    if tags is not None and not isinstance(tags, Mapping):
        raise ConfigError(f"tags must be a dict such as {{'team': 'vision'}}, got {tags!r}.")
    modules = _as_modules(by_value)
    found = _resolve_source(x, checkpoint, config)
    if name is not None:
        check_name(name)
    registered = []
    for mod in modules:
        try:
            cloudpickle.register_pickle_by_value(mod)
            registered.append(mod)
        except ValueError:
            pass  # already by value
    tmp = tempfile.mkdtemp(prefix="tandem-put-")
    try:
        if isinstance(found, _Instance):
            staged = _stage_instance(found.model, tmp)
        else:
            assert found.checkpoint is not None
            staged = _stage_saved(found.checkpoint, x if isinstance(x, type) else None,
                                  bool(modules), tmp)
        name = check_name(name if name is not None else staged.qualname.rsplit(".", 1)[-1])
        meta = {
            "config": staged.config,
            "metrics": dict(found.metrics),
            "lineage": {**found.lineage, "user": _user(), "host": socket.gethostname(),
                        "time": time.time()},
            "environment": _environment(),
            "model_class": {"module": staged.module, "qualname": staged.qualname,
                            "by_value": [mod.__name__ for mod in modules]},
            "tags": dict(tags or {}),
        }
        record = registry().add(name, staged.directory, meta, version=version)
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
    if _process_backend is None and not _uses_server():
        # the local registry read with the stdlib (no SQLAlchemy import; model.serve's
        # path): None for anything it does not know, which the full store then answers
        from tandem.model.registry._record import read_sqlite

        root, files = _local_paths()
        with _lock:
            opened = (root, files) in _local
        if not opened:
            found = read_sqlite(os.path.join(root, "registry.db"), r)
            if found is not None:
                return found
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
        model_config: Mapping[str, object] | None = None) -> Model:
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
        from tandem.model.registry._store import ModelStore

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


def check_not_served(name: str, version: int, service: object = None) -> None:
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
