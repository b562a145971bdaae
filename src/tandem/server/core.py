"""``TrainServer``: the job service, the job store and the event hub of one server process.

What it adds to ``LocalJobService``, each in its own module:

* ``ownership.py``: the server takes its store exclusively (a second server on the same
  store refuses to start) and checks it for damage before trusting it;
* ``loader.py``: submitted payloads are unpickled and every field checked before anything
  is recorded;
* ``packages.py``: uploaded ``working_dir`` packages, so a job's own modules import here;
* ``recovery.py``: a restarted server re-queues what was queued or running (running jobs
  resume from their latest committed checkpoint) and keeps finished ones as history;
* ``projection.py`` + ``writer.py``: job events (state changes, reports, checkpoints) go to
  the store through the batching, outage-proof ``StoreWriter`` and to event streams
  through the ``EventHub``;
* ``usage.py``: resource-use samples of every worker.

The HTTP layer (``app.py``) calls it; it knows nothing of HTTP.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any

import cloudpickle

from tandem._core.errors import ConfigError, JobNotFoundError, TandemError
from tandem._core.ids import new_id
from tandem.cluster import make_cluster
from tandem.cluster.local import LocalCluster
from tandem.jobs.client.packaging import write_cachedir_tag
from tandem.jobs.service import LocalJobService
from tandem.jobs.spec import JobSpec, JobStatus
from tandem.jobs.store import (
    JobRecord,
    JobStore,
    JobStoreError,
    JobStoreUnavailableError,
    TransitionRecord,
    open_store,
)
from tandem.server.config import ServerConfig
from tandem.server.events import EventHub
from tandem.server.loader import (
    PayloadError,
    SpecError,
    check_env_vars,
    decode_payload,
    load_spec,
)
from tandem.server.ownership import (
    HistoryMarker,
    StoreDeposedError,
    StoreLock,
    StoreOwnedError,
    check_sqlite_file,
)
from tandem.server.packages import PackageStore, UploadTooLargeError
from tandem.server.projection import EventProjection, outcome_from_record
from tandem.server.recovery import ACTIVE_STATES, recover
from tandem.server.runner_hooks import RuntimeEnvTaker
from tandem.server.usage import UsageSampler
from tandem.server.writer import StoreWriter, replay_journal

if TYPE_CHECKING:
    from tandem.model.registry import ModelStore
    from tandem.server.users import AccountStore

__all__ = ["ACTIVE_STATES", "OwnerMismatchError", "PayloadError", "RunFolderBusyError", "SpecError",
           "StoreOwnedError", "TrainServer", "UploadTooLargeError"]

logger = logging.getLogger(__name__)


class RunFolderBusyError(TandemError, ValueError):
    """A job would write into the run folder of a job that is still live (HTTP 409)."""


class OwnerMismatchError(TandemError, PermissionError):
    """A non-admin submitted a job whose spec names another owner (HTTP 403)."""


class TrainServer:
    """The server-side state. Thread-safe; ``close()`` leaves active jobs to be re-queued.

    Args:
        config: the server's settings.
        store: a job store to use instead of opening ``config.db_url`` (tests).
        cluster: a cluster to use instead of a ``LocalCluster`` from the config (tests).
        owner: what the store lock records about this server (its address); a second
            server on the same store names it when it refuses to start.

    Raises:
        StoreOwnedError: another server holds the store.
        ConfigError: the store is damaged, lost its history, or cannot be opened.
    """

    def __init__(
        self,
        config: ServerConfig,
        store: JobStore | None = None,
        cluster: Any = None,
        owner: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self.started_at = time.time()
        os.makedirs(config.storage_path, mode=0o700, exist_ok=True)
        # a storage folder inside a client's working_dir is never uploaded back to it
        write_cachedir_tag(config.storage_path, "a tandem train server's storage")
        self.packages = PackageStore(os.path.join(config.storage_path, "packages"),
                                     config.max_upload_bytes)
        self.packages_dir = self.packages.root
        self.store_url = _hide_password(config.db_url)
        self.marker = HistoryMarker(config.storage_path)
        self.store = store if store is not None else _open_checked(config.db_url, self.marker)
        self.lock = StoreLock(self.store, self.store_url, owner or {})
        try:
            self.lock.acquire()
            # (a store handed in by a caller is not this folder's: never marked)
            self._history_marked = (store is not None
                                    or self.marker.check_after_open(self.store_url, self.store))
            self.journal_path = os.path.join(config.storage_path, "journal.jsonl")
            try:
                replay_journal(self.store, self.journal_path,
                               owner_epoch=self.lock.previous_epoch)
            except ValueError as e:
                raise ConfigError(
                    f"{e}. It holds job events an earlier server could not store; nothing was "
                    f"changed. Move it aside (mv {self.journal_path} {self.journal_path}.bad) "
                    f"to start without them.") from None
        except BaseException:
            self.lock.release()
            if store is None:
                self.store.close()
            raise
        if cluster is None and config.ray_address is not None:
            cluster = make_cluster("ray", config.ray_address,
                                   autoscaling=config.ray_autoscaling)
        self.cluster = cluster if cluster is not None else LocalCluster(
            num_cpus=config.num_cpus, num_gpus=config.num_gpus, memory=config.memory,
            resources=dict(config.resources),
        )
        self.service = LocalJobService(
            self.cluster, scheduler=config.admission_policy()
        )
        self.hub = EventHub()
        self.deposed: str | None = None
        # The stores of the parts built on the server (ServerContext), opened on first use.
        self._accounts: AccountStore | None = None
        self._models: ModelStore | None = None
        self._stores_lock = threading.Lock()
        self.writer = StoreWriter(self.store, journal_path=self.journal_path,
                                  on_reconnect=self.lock.ensure, check_owner=self.lock.verify,
                                  on_down=self.service.hold_starts,
                                  on_deposed=self._on_deposed, epoch=self.lock.epoch,
                                  deposed_error=StoreDeposedError)
        self.projection = EventProjection(self.writer, self.hub, self._forget)
        self._lock = threading.Lock()
        self._run_folders: dict[str, str] = {}  # run path -> live job writing into it
        self.service.subscribe(self.projection.on_job_event)
        # a job's questions for its submitter (a trial waiting for the tuner's verdict)
        # go to the client following it, through its event stream
        self.service.call_router = lambda job, kind, call: self.hub.call(job.job_id, kind, call)
        # Code running in this process (a trial that fits a Trainer, through its driver
        # calls) submits to this service, not to a new embedded one.
        from tandem.jobs import runtime

        if runtime.current_service() is None:
            runtime.set_service(self.service)
        self.recovered = recover(self)
        prewarm = getattr(self.cluster, "prewarm", None)
        if prewarm is not None:
            prewarm(())  # start the worker launcher now: the first job starts fast
        self.sampler = UsageSampler(self._running_pids, self.projection.on_usage,
                                    config.usage_interval_s)
        #: the imports the first job would otherwise wait for (``server.warmup``), when
        #: the server started them
        self.warmup: threading.Thread | None = None

    def warming(self) -> bool:
        """Whether the server is still importing, in the background, what its first job
        would (``server.warmup``): ``/api/health``'s ``warm`` is False until it is done."""
        if self.warmup is not None and self.warmup.is_alive():
            return True
        warming = getattr(self.cluster, "warming", None)
        return bool(warming()) if warming is not None else False

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stores what is queued and stops; jobs still PENDING/RUNNING stay so in the store
        and are re-queued by the next server on the same store. Events the store could not
        take (an outage) stay in the journal for the next server."""
        self.sampler.stop()
        self.writer.close()
        self.projection.detached = True
        self.service.shutdown(timeout_s=5.0)
        from tandem.jobs import runtime

        if runtime.current_service() is self.service:
            runtime.set_service(None)
        shut = getattr(self.cluster, "shutdown", None)
        if shut is not None:
            shut()
        for part in (self._models, self._accounts):  # registry; users, owners, audit log
            if part is not None:
                part.close()  # before the store: the last connection out checkpoints SQLite
        self.lock.release()
        self.store.close()

    def accounts(self, admin_token: str | None = None) -> AccountStore:
        """Users, owners, the audit log and quotas, on this server's database (opened on
        first use; ``admin_token`` authenticates as the admin ``admin``)."""
        with self._stores_lock:
            if self._accounts is None:
                from tandem.server.users import AccountStore

                self._accounts = AccountStore(self.config.db_url, admin_token)
            return self._accounts

    def models_store(self) -> ModelStore:
        """The model registry on this server's database; its files under
        ``<storage>/models`` (or ``$TANDEM_MODELS_STORAGE``). Opened on first use."""
        with self._stores_lock:
            if self._models is None:
                from tandem.model.registry import ModelStore

                storage = os.environ.get("TANDEM_MODELS_STORAGE") or os.path.join(
                    self.config.storage_path, "models")
                self._models = ModelStore(self.config.db_url, storage)
            return self._models

    def _on_deposed(self, reason: str) -> None:
        """Another server owns the store now: this one stops its jobs (their ends are not
        written: the new owner re-queued them) and starts none again."""
        self.deposed = reason
        self.service.hold_starts(reason)
        for job in self.service.list():
            if not job.status.is_terminal:
                try:
                    self.service.stop(job.job_id)
                except Exception:
                    logger.exception("could not stop job %s of a deposed server", job.job_id)

    def store_problem(self) -> str | None:
        """Why the store cannot be used now (None when it can): for ``/api/health``."""
        reason = self.writer.down_reason
        if reason is not None:
            return reason
        try:
            self.store.list_jobs(limit=1)
        except JobStoreError as e:
            return str(e)
        return None

    # ------------------------------------------------------------------ packages

    def package_dir(self, package_id: str) -> str:
        return self.packages.path(package_id)

    def has_package(self, package_id: str) -> bool:
        return self.packages.has(package_id)

    def add_package(self, package_id: str, data: bytes) -> bool:
        """Unpacks an uploaded working_dir zip; returns False if it was already here."""
        return self.packages.add(package_id, data)

    def _too_large(self, size: int) -> str:
        return self.packages.too_large(size)

    # ------------------------------------------------------------------ submission

    def submit(
        self,
        payload_b64: str,
        *,
        priority: int | None = None,
        tags: list[str] | None = None,
        name: str | None = None,
        runtime_env: dict[str, Any] | None = None,
        owner: str | None = None,
        may_assign_owner: bool = True,
    ) -> JobRecord:
        """Loads, checks, records and queues a job. Nothing is recorded for a refused one.

        ``owner`` is the authenticated user submitting it: the job's owner, unless the spec
        names one (``tandem.init(owner=...)``) and ``may_assign_owner`` (an admin).

        Raises:
            UploadTooLargeError: the payload is over the limit.
            PayloadError: it does not load here (a missing module, not a JobSpec, ...).
            SpecError: a field no job may have (named).
            RunFolderBusyError: a live job writes into the same run folder.
            OwnerMismatchError: the spec names another owner and ``may_assign_owner`` is
                False.
            ConfigError: an unknown working_dir package, or a job that can never fit.
            JobStoreError: the store cannot record it (HTTP 503).
        """
        if len(payload_b64) > self.config.max_upload_bytes * 4 // 3 + 4:
            raise UploadTooLargeError(self._too_large(len(payload_b64) * 3 // 4))
        down = self.writer.down_reason
        if down is not None:
            raise JobStoreUnavailableError(f"no job is accepted now: {down}.")
        raw = decode_payload(payload_b64)
        env = dict(runtime_env or {})
        env_vars = dict(env.get("env_vars") or {})
        check_env_vars(env_vars, ("body", "runtime_env", "env_vars"))
        working_dir = self.packages.working_dir(env.get("working_dir"))
        spec = load_spec(raw, working_dir)
        spec = dataclasses.replace(
            spec,
            priority=spec.priority if priority is None else priority,
            tags=tuple(dict.fromkeys(tuple(spec.tags) + tuple(tags or ()))),
            name=name or spec.name,
        )
        if owner is not None:
            if spec.owner and spec.owner != owner and not may_assign_owner:
                raise OwnerMismatchError(
                    f"job {spec.name!r} names the owner {spec.owner!r}, but it is submitted "
                    f"by user {owner!r}; only an admin submits for someone else. Drop "
                    f"tandem.init(owner=...) (the job is then {owner!r}'s).")
            spec = dataclasses.replace(spec, owner=spec.owner or owner)
        self.cluster.check_feasible(spec.bundles[:spec.min_bundles or len(spec.bundles)],
                                    spec.strategy)  # an elastic gang: at its least
        job_id = new_id("job_")
        record = JobRecord(
            job_id=job_id, name=spec.name, state="PENDING", submitted_at=time.time(),
            priority=spec.priority, tags=spec.tags, spec=raw,
            spec_json=self._spec_json(spec, env),
        )
        run_path = dict(spec.metadata).get("run_path")
        with self._lock:  # the check and the claim are one step: two submits cannot race
            self._claim_run_folder(job_id, run_path)
            try:
                self.store.create_job(record)
            except BaseException:
                self._release_run_folder(job_id)
                raise
        if not self._history_marked:
            self.marker.mark(self.store_url)  # from now on, a lost store is noticed
            self._history_marked = True
        self.queue(job_id, spec, working_dir, env_vars, next_seq=0, summary={})
        return record

    def _claim_run_folder(self, job_id: str, run_path: object) -> None:
        if not run_path:
            return
        key = os.path.normpath(str(run_path)) if "://" not in str(run_path) else str(run_path)
        holder = self._run_folders.get(key)
        if holder is not None and holder != job_id:
            state = self.live_state(holder)
            if state is not None and not JobStatus(state).is_terminal:
                raise RunFolderBusyError(
                    f"job {holder} ({state}) is writing into the run folder {key}; two live "
                    f"jobs never share one (their logs and checkpoints would mix). Wait for "
                    f"it (`tandem jobs show {holder}`), stop it (`tandem jobs stop {holder}`), "
                    f"or give this run another RunConfig(name=...)."
                )
        self._run_folders[key] = job_id

    def _release_run_folder(self, job_id: str) -> None:
        for key in [k for k, v in self._run_folders.items() if v == job_id]:
            del self._run_folders[key]

    @staticmethod
    def _spec_json(spec: JobSpec, env: dict[str, Any]) -> dict[str, object]:
        meta = {k: v for k, v in dict(spec.metadata).items()
                if isinstance(v, (str, int, float, bool)) or v is None}
        return {
            "bundles": [dict(b) for b in spec.bundles],
            "num_workers": len(spec.bundles),
            "strategy": spec.strategy,
            "runner": type(spec.runner).__name__,
            "owner": spec.owner,
            "metadata": meta,
            "runtime_env": {"working_dir": env.get("working_dir"),
                            "env_vars": sorted(env.get("env_vars") or {})},
            "env_vars": env.get("env_vars") or {},
        }

    def queue(
        self,
        job_id: str,
        spec: JobSpec,
        working_dir: str | None,
        env_vars: dict[str, str],
        next_seq: int,
        summary: dict[str, Any],
    ) -> None:
        """Hands a recorded job to the job service (at submission and at re-queue)."""
        if isinstance(spec.runner, RuntimeEnvTaker):
            spec.runner.apply_runtime_env(working_dir, env_vars)
        run_path = dict(spec.metadata).get("run_path")
        summary = dict(summary)
        if run_path:
            summary.setdefault("path", run_path)
            with self._lock:
                key = (os.path.normpath(str(run_path)) if "://" not in str(run_path)
                       else str(run_path))
                self._run_folders.setdefault(key, job_id)
        self.projection.track(job_id, summary)
        self.hub.open(job_id, "PENDING", next_seq)
        try:
            self.service.submit(spec, job_id=job_id)
        except BaseException as e:
            self.hub.drop(job_id)
            self.projection.untrack(job_id)
            with self._lock:
                self._release_run_folder(job_id)
            self.store.set_state(job_id, "FAILED", time.time(), f"{type(e).__name__}: {e}",
                                 traceback=traceback.format_exc())
            raise

    def _forget(self, job_id: str) -> None:
        """A job's end is stored: the service and the run-folder table let it go."""
        self.service.forget(job_id)
        with self._lock:
            self._release_run_folder(job_id)

    # ------------------------------------------------------------------ workers

    def _running_pids(self) -> dict[str, dict[int, int]]:
        out = {}
        for job in self.service.list():
            if job.status in (JobStatus.RUNNING, JobStatus.RESTARTING):
                try:
                    pids = job.spec.runner.worker_pids()
                except Exception:
                    logger.debug("no worker pids for %s", job.job_id, exc_info=True)
                    continue
                if pids:
                    out[job.job_id] = pids
        return out

    # ------------------------------------------------------------------ queries

    def live_state(self, job_id: str) -> str | None:
        """The service's view of a job still in memory (fresher than the store)."""
        try:
            return self.service.get(job_id).status.value
        except JobNotFoundError:
            return None

    def get(self, job_id: str) -> JobRecord:
        rec = self.store.get_job(job_id)
        if rec is None:
            raise JobNotFoundError(
                f"no job with id {job_id!r} on this server; list jobs with GET /api/jobs "
                f"or `tandem jobs list`"
            )
        return rec

    def get_settled(self, job_id: str
                    ) -> tuple[JobRecord, list[TransitionRecord], str | None]:
        """The stored job, its transitions and its live state; a job whose state changed
        (it just ended, was preempted, resumed) is stored first, so the record
        (transitions, result, error) agrees with the state shown.

        The live state is read after the record: a state shown is never older than the
        last transition shown (read the other way round, a preemption stored between the
        two reads showed ``RUNNING`` beside its own ``RESTARTING`` transition)."""
        rec, transitions = self.get(job_id), self.store.transitions(job_id)
        live = self.live_state(job_id)
        if live is not None and live != rec.state and self.writer.flush(10.0):
            rec, transitions = self.get(job_id), self.store.transitions(job_id)
            live = self.live_state(job_id)
        return rec, transitions, live

    def stop(self, job_id: str, by: str = "api") -> None:
        """Stops a job; ``by`` (api, cli, dashboard) is recorded as the stop's reason."""
        self.projection.note_stop(job_id, by)
        try:
            self.service.stop(job_id)
            return
        except JobNotFoundError:
            pass
        self.get(job_id)  # history (nothing to stop) or unknown (404)

    def outcome_bytes(self, job_id: str) -> bytes | None:
        """The pickled ``JobOutcome`` of a finished job; None while it runs."""
        data = self.projection.outcome(job_id)
        if data is not None:
            return data
        rec = self.get(job_id)
        if not rec.is_terminal:
            return None
        return cloudpickle.dumps(outcome_from_record(rec))

    def log_paths(self, job_id: str) -> dict[int, str]:
        try:
            job = self.service.get(job_id)
            if job.log_paths:
                return dict(job.log_paths)
        except JobNotFoundError:
            pass
        rec = self.get(job_id)
        paths = (rec.result or {}).get("log_paths") or {}
        if not paths:
            run_path = ((rec.result or {}).get("path")
                        or rec.spec_json.get("metadata", {}).get("run_path"))
            n = int(rec.spec_json.get("num_workers") or 0)
            if run_path and "://" not in str(run_path):
                return {r: os.path.join(run_path, "logs", f"rank_{r}.log") for r in range(n)}
        return {int(r): p for r, p in paths.items()}

    def cluster_info(self) -> dict[str, Any]:
        jobs = self.service.list()
        running = [j for j in jobs if j.status in (JobStatus.RUNNING, JobStatus.RESTARTING)]
        pending = [j for j in jobs if j.status is JobStatus.PENDING]
        from tandem.server.usage import usage_dict

        latest = self.sampler.latest
        return {
            "resources": self.cluster.resources(),
            "available": self.cluster.available(),
            "num_running": len(running),
            "num_pending": len(pending),
            "warm_pool": self.cluster.warm_pool_info(),
            "jobs": [
                {"job_id": j.job_id, "name": j.name, "state": j.status.value,
                 "bundles": [dict(b) for b in j.bundles],
                 "usage": [usage_dict(s) for s in latest.get(j.job_id, [])]}
                for j in running
            ],
        }


# Kept importable from here (they lived in this module before the split).
_outcome_from_record = outcome_from_record


def _open_checked(url: str, marker: HistoryMarker) -> JobStore:
    """Opens the server's store after checking it: a damaged SQLite file, or a store that
    lost the history recorded in it, is refused (``ConfigError``) and left untouched."""
    from tandem.server.ownership import sqlite_path

    path = sqlite_path(url)
    marker.check_before_open(_hide_password(url))
    if path is not None:
        check_sqlite_file(path)
    try:
        return open_store(url)
    except (ConfigError, ImportError):
        raise
    except Exception as e:  # noqa: BLE001
        raise ConfigError(
            f"cannot open the job store {_hide_password(url)}: {type(e).__name__}: "
            f"{getattr(e, 'orig', None) or e}. Check that the database runs and the URL "
            f"(--db) is right."
        ) from None


def _hide_password(url: str) -> str:
    try:
        import sqlalchemy as sa

        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except Exception:  # noqa: BLE001
        return url
