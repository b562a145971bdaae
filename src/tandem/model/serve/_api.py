"""``model.serve`` and ``ServeHandle``."""

from __future__ import annotations

import dataclasses
import secrets
import tempfile
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem._core.extras import require_extras
from tandem.model.serve._errors import ServeError
from tandem.model.serve._settings import ServeSettings

if TYPE_CHECKING:  # (imported by serve(): ``import tandem.model`` stays light)
    from tandem.jobs.handle import JobHandle


class ServeHandle:
    """A served model: ``.url`` (its route prefix), ``.status()``, ``.stop()``, ``.wait()``,
    ``.job_id``. It is a job like any other: ``tandem jobs list`` shows it and ``tandem jobs
    stop ID`` stops it."""

    def __init__(self, job: JobHandle, name: str, version: int | None) -> None:
        self.job = job
        self.name = name
        self.version = version
        self._last: dict[str, Any] = {}
        self._seen = 0  # the number of the next report status() reads
        self.url: str = ""
        self.api_key: str | None = None
        """The key requests must carry (``Authorization: Bearer <key>``) when the model
        is exposed (``serve_settings={'expose': True}``); None on loopback."""

    @property
    def job_id(self) -> str:
        return self.job.job_id

    def _wait_ready(self, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        for report in self.job.results():
            self._last = report
            self.url = report.get("url") or self.url
            if report.get("replicas_ready", 0) >= report.get("replicas", 1):
                return
            if deadline is not None and time.monotonic() > deadline:
                break
        if self.job.done():
            self.job.wait()  # raises the job's error
            raise ServeError(f"serving {self.name} ended before it was ready "
                             f"({self.job.status()}).")
        raise TimeoutError(f"{self.name} is not ready after {timeout} s; it keeps starting "
                           f"(see handle.status(), `tandem jobs logs {self.job_id}`).")

    def status(self) -> dict[str, Any]:
        """``state`` (the job's), ``url``, ``replicas``, ``replicas_ready``, ``restarts``."""
        window = self.job.job.read_reports(self._seen, 0)  # the latest, without waiting
        if window.rows:
            self._last = window.rows[-1]
        self._seen = window.next
        return {"state": self.job.status(), "job_id": self.job_id, **self._last,
                "url": self.url or self._last.get("url")}

    def stop(self) -> None:
        """Stops serving: the port and the replicas' resources are free when it returns."""
        self.job.stop()
        try:
            self.job.wait(timeout=30)
        except Exception:  # noqa: BLE001, S110 - a stopped job may report its stop as an error
            pass

    def wait(self, timeout: float | None = None) -> None:
        """Blocks until the served model stops (``tandem jobs stop``, ``handle.stop()``)."""
        self.job.wait(timeout)

    def __repr__(self) -> str:
        return f"ServeHandle({self.name!r}, version={self.version}, url={self.url!r}, " \
               f"job_id={self.job_id!r})"

    def __enter__(self) -> ServeHandle:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(
    model: Any,
    *,
    serve_settings: ServeSettings | Mapping[str, Any] | None = None,
    ready_timeout_s: float | None = 300.0,
    num_gpus: float | None = None,
) -> ServeHandle:
    """Serves a model over HTTP as a long-running job; returns once every replica is ready.

    ``model``: a registry reference (``"digits"``, ``"digits@3"``, ``"digits@prod"``, a
    ``ModelRef``) or, without a train server, a Model instance (served as is, unregistered).
    ``serve_settings``: a dict or ``ServeSettings`` (route_prefix, host, port,
    num_replicas, resources_per_replica, num_gpus, max_batch_size, batch_wait_ms, ...).
    ``num_gpus``: GPUs per replica (as ``serve_settings={"num_gpus": ...}``): each replica
    is placed on GPUs of the cluster, sees them through ``CUDA_VISIBLE_DEVICES``, and a
    ``TorchModel``'s weights go to ``cuda`` there.

    Raises:
        ModelNotFoundError: the reference names nothing in the registry.
        ConfigError: bad settings, the port is in use, or GPUs asked of a cluster
            without enough of them.
        ServeError: the replicas cannot load the model (with their traceback).
    """
    from tandem.model._early import start_serving_imports
    from tandem.model.registry._ref import ModelRef

    if not isinstance(model, (str, ModelRef)) and not _is_model(model):
        raise ConfigError(
            f"model.serve takes a registry reference ('digits', 'digits@3', 'digits@prod', "
            f"a ModelRef) or a Model instance; got {model!r} ({type(model).__name__}).")
    settings = ServeSettings.of(serve_settings)
    if num_gpus is not None:
        settings = dataclasses.replace(settings, num_gpus=num_gpus)
    settings.bundle()  # validate before anything starts
    require_extras("server", what="model.serve()")  # before anything starts, too
    # The first deployment's critical path is the process replicas fork from: it starts now
    # (with the replica's code) while this process finds the model in the registry, and
    # the HTTP server's modules load meanwhile too.
    start_serving_imports(_framework_hint(model))
    from tandem.jobs import runtime
    from tandem.jobs.client import RemoteJobService
    from tandem.jobs.handle import JobHandle
    from tandem.jobs.spec import JobSpec
    from tandem.model.registry._api import resolve
    from tandem.model.serve._runner import ServeRunner, serve_imports

    svc = runtime.get_service()
    remote = isinstance(svc, RemoteJobService)
    if not remote:  # this process runs the HTTP front
        _import_in_background("uvicorn")
    cluster = None if remote else svc.cluster
    if cluster is not None:
        _check_gpus(settings, cluster.resources())
    if settings.expose and settings.api_key is None:
        # An exposed model takes the train server's token, or a key of its own.
        token = svc.connection.token if isinstance(svc, RemoteJobService) else None
        settings = dataclasses.replace(settings, api_key=token or secrets.token_urlsafe(32))
    if isinstance(model, (str, ModelRef)):
        record = resolve(model)
        location = record.location  # read by the replicas (a folder or an fsspec URL)
        owned = False
        name, version, config = record.name, record.version, dict(record.config)
        start_serving_imports(serve_imports(location))  # its framework, as soon as known
    else:  # a Model (checked above)
        if remote:
            raise ConfigError(
                "a train server serves registered models: register it first, then serve the "
                "reference: ref = model.put(m, name='digits'); model.serve(ref).")
        m = model() if isinstance(model, type) else model
        location = tempfile.mkdtemp(prefix="tandem-serve-")
        m.save(location)
        start_serving_imports(serve_imports(location))
        owned = True
        name, version, config = type(m).__name__, None, dict(m.config)
    runner = ServeRunner(name, version, config, location, settings, owns_location=owned)
    what = f"{name}@{version}" if version is not None else name
    spec = JobSpec(name=f"serve:{what}", bundles=tuple(settings.bundle()
                                                       for _ in range(settings.num_replicas)),
                   runner=runner, tags=("serve",),
                   metadata={"kind": "serve", "model": what, "route_prefix": runner.prefix})
    job = svc.submit(spec)
    handle = ServeHandle(JobHandle(job, svc), name, version)
    handle.api_key = settings.api_key
    try:
        handle._wait_ready(ready_timeout_s)
    except BaseException:
        if not handle.job.done():
            handle.stop()
        raise
    return handle


def _framework_hint(model: object) -> tuple[str, ...]:
    """The frameworks the newest local version of a reference's name imports (torch, ...),
    read from disk without the registry's database: ``serve`` starts importing them before
    its lookup has named the version (which adds what the hint missed)."""
    if not isinstance(model, str):  # a ModelRef or a Model: no guess needed or possible
        from tandem.model.registry._ref import ModelRef

        if not isinstance(model, ModelRef):
            return ()
    from tandem.model._early import serve_imports
    from tandem.model.registry._api import local_model_dirs

    for folder in local_model_dirs(model)[:1]:
        return serve_imports(folder)
    return ()


def _import_in_background(module: str) -> None:
    """Imports ``module`` in a daemon thread (a speed-up only: an error shows on use)."""
    import importlib
    import sys
    import threading

    if module in sys.modules:
        return

    def run() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S110 - imported again, with its error, on use
            pass

    threading.Thread(target=run, name=f"tandem-import-{module}", daemon=True).start()


def _check_gpus(settings: ServeSettings, total: Mapping[str, float]) -> None:
    """GPUs asked of a cluster that has fewer is refused before anything starts."""
    per = settings.gpus_per_replica
    if per <= 0:
        return
    have = float(total.get("GPU", 0.0))
    n = settings.num_replicas
    need = per * n
    # (fractions pack onto one GPU; whole GPUs each need their own)
    fits = need <= have + 1e-9 if per >= 1 else (per <= 1 and have >= 1
                                                  and n <= int(have) * int(1 / per + 1e-9))
    if fits:
        return
    raise ConfigError(
        f"model.serve asks for num_gpus={per:g} per replica ({n} replica(s): {need:g} "
        f"GPU(s) in all), but this cluster has GPU={have:g}. Serve on CPU (leave num_gpus "
        f"unset), ask for fewer replicas or a fraction of a GPU each (num_gpus=0.5), or "
        f"start tandem where GPUs are (tandem.init(num_gpus=N) on a machine with them, or a "
        f"train server that has them: TANDEM_ADDRESS=...).")


def _is_model(x: object) -> bool:
    try:
        from tandem.model._model import Model
    except ImportError:  # pragma: no cover
        return False
    return isinstance(x, Model) or (isinstance(x, type) and issubclass(x, Model))


__all__ = ["ServeHandle", "ServeSettings", "serve"]
