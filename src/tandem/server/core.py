"""``TrainServer``: the job service, the job store and the event hub of one server process.

What it adds to ``LocalJobService``:

* every job is recorded in the store (SQLite or PostgreSQL) with its pickled spec, so a
  restarted server re-queues what was queued or running (running jobs resume from their
  latest committed checkpoint) and keeps finished ones as history;
* job events (state changes, reports, checkpoints) go to the store through the batching
  ``StoreWriter`` and to event streams through the ``EventHub``;
* uploaded ``working_dir`` packages, so a job's own modules import here;
* resource-use samples of every worker.

The HTTP layer (``app.py``) calls it; it knows nothing of HTTP.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import io
import logging
import os
import shutil
import sys
import threading
import time
import traceback
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError, JobNotFoundError, TandemError
from tandem._core.ids import new_id
from tandem.cluster import make_cluster
from tandem.cluster.local import LocalCluster
from tandem.jobs.scheduler import GangScheduler
from tandem.jobs.service import Job, LocalJobService
from tandem.jobs.spec import JobOutcome, JobSpec, JobStatus
from tandem.jobs.store import JobRecord, JobStore, ReportRecord, UsageSample, open_store
from tandem.server.config import ServerConfig
from tandem.server.events import EventHub, StoreWriter
from tandem.server.usage import UsageSampler

logger = logging.getLogger(__name__)

ACTIVE_STATES = ("PENDING", "RUNNING", "RESTARTING")
_OUTCOMES_KEPT = 2000
_load_lock = threading.Lock()


class PayloadError(TandemError, ValueError):
    """A submitted job cannot be loaded on the server (HTTP 422)."""


class UploadTooLargeError(TandemError, ValueError):
    """A request body over the server's limit (HTTP 413)."""


@contextlib.contextmanager
def _import_path(folder: str | None) -> Iterator[None]:
    """Puts ``folder`` first on ``sys.path`` while loading a job; afterwards forgets the
    modules imported from it, so jobs with same-named modules never see each other's."""
    if folder is None:
        yield
        return
    with _load_lock:
        sys.path.insert(0, folder)
        try:
            yield
        finally:
            try:
                sys.path.remove(folder)
            except ValueError:
                pass
            prefix = os.path.join(folder, "")
            for name, mod in list(sys.modules.items()):
                f = getattr(mod, "__file__", None) or ""
                if f.startswith(prefix):
                    sys.modules.pop(name, None)


def _describe_load_error(e: BaseException, working_dir: str | None) -> str:
    if isinstance(e, ModuleNotFoundError) and e.name:
        where = ("the uploaded working_dir does not have it either" if working_dir else
                 "no working_dir was uploaded with the job")
        return (
            f"The job needs the module {e.name!r}, which the train server cannot import "
            f"({where}). Send your code along with tandem.init(address=..., "
            f"runtime_env={{'working_dir': '.'}}) from the folder that holds {e.name!r}, or "
            f"install the module where the server runs."
        )
    return (
        f"The job payload could not be loaded on the train server: {type(e).__name__}: {e}. "
        f"Submit jobs with tandem (trainer.fit() with TANDEM_ADDRESS set); if the payload "
        f"refers to your own modules, send them with runtime_env={{'working_dir': '.'}}."
    )


class TrainServer:
    """The server-side state. Thread-safe; ``close()`` leaves active jobs to be re-queued.

    Args:
        config: the server's settings.
        store: a job store to use instead of opening ``config.db_url`` (tests).
        cluster: a cluster to use instead of a ``LocalCluster`` from the config (tests).
    """

    def __init__(
        self,
        config: ServerConfig,
        store: JobStore | None = None,
        cluster: Any = None,
    ) -> None:
        self.config = config
        self.started_at = time.time()
        os.makedirs(config.storage_path, mode=0o700, exist_ok=True)
        self.packages_dir = os.path.join(config.storage_path, "packages")
        os.makedirs(self.packages_dir, exist_ok=True)
        self.store = store if store is not None else open_store(config.db_url)
        if cluster is None and config.ray_address is not None:
            cluster = make_cluster("ray", config.ray_address,
                                   autoscaling=config.ray_autoscaling)
        self.cluster = cluster if cluster is not None else LocalCluster(
            num_cpus=config.num_cpus, num_gpus=config.num_gpus, memory=config.memory,
            resources=dict(config.resources),
        )
        self.service = LocalJobService(
            self.cluster, scheduler=GangScheduler(reserve_after_s=config.reserve_after_s)
        )
        self.hub = EventHub()
        self.writer = StoreWriter(self.store)
        self._lock = threading.Lock()
        self._summaries: dict[str, dict[str, Any]] = {}
        self._outcomes: OrderedDict[str, bytes | None] = OrderedDict()
        self._detached = False
        self.service.subscribe(self._on_job_event)
        # Code running in this process (a trial that fits a Trainer, through its driver
        # calls) submits to this service, not to a new embedded one.
        from tandem.jobs import runtime

        if runtime.current_service() is None:
            runtime.set_service(self.service)
        self.recovered = self._recover()
        prewarm = getattr(self.cluster, "prewarm", None)
        if prewarm is not None:
            prewarm(())  # start the worker launcher now: the first job starts fast
        self.sampler = UsageSampler(self._running_pids, self._on_usage, config.usage_interval_s)

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        """Stores what is queued and stops; jobs still PENDING/RUNNING stay so in the store
        and are re-queued by the next server on the same store."""
        self.sampler.stop()
        self.writer.close()
        self._detached = True
        self.service.shutdown(timeout_s=5.0)
        from tandem.jobs import runtime

        if runtime.current_service() is self.service:
            runtime.set_service(None)
        shut = getattr(self.cluster, "shutdown", None)
        if shut is not None:
            shut()
        self.store.close()

    # ------------------------------------------------------------------ packages

    def package_dir(self, package_id: str) -> str:
        return os.path.join(self.packages_dir, package_id)

    def has_package(self, package_id: str) -> bool:
        return os.path.isdir(self.package_dir(package_id))

    def add_package(self, package_id: str, data: bytes) -> bool:
        """Unpacks an uploaded working_dir zip; returns False if it was already here."""
        if len(data) > self.config.max_upload_bytes:
            raise UploadTooLargeError(self._too_large(len(data)))
        target = self.package_dir(package_id)
        if os.path.isdir(target):
            return False
        tmp = f"{target}.tmp-{new_id()}"
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                total = 0
                for info in zf.infolist():
                    name = info.filename
                    if name.startswith("/") or ".." in name.split("/"):
                        raise PayloadError(f"the package has an unsafe path {name!r}")
                    total += info.file_size
                    if total > 4 * self.config.max_upload_bytes:
                        raise UploadTooLargeError(self._too_large(total))
                zf.extractall(tmp)
        except zipfile.BadZipFile as e:
            shutil.rmtree(tmp, ignore_errors=True)
            raise PayloadError(
                f"the uploaded working_dir package is not a zip file ({e}); upload what "
                f"tandem.jobs.client.package_working_dir() makes"
            ) from e
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.rename(tmp, target)
        except OSError:  # uploaded twice at once
            shutil.rmtree(tmp, ignore_errors=True)
        return True

    def _too_large(self, size: int) -> str:
        return (
            f"the upload is {size / 2**20:.1f} MiB, over this server's limit of "
            f"{self.config.max_upload_bytes / 2**20:.0f} MiB. Leave data and outputs out of "
            f"runtime_env['working_dir'] (list them in .gitignore), keep large datasets in "
            f"storage the workers read, or start the server with a larger --max-upload-mb."
        )

    # ------------------------------------------------------------------ submission

    def _load(self, raw: bytes, working_dir: str | None) -> JobSpec:
        with _import_path(working_dir):
            try:
                spec = cloudpickle.loads(raw)
            except Exception as e:
                raise PayloadError(_describe_load_error(e, working_dir)) from e
            if not isinstance(spec, JobSpec):
                raise PayloadError(
                    f"The payload is a {type(spec).__name__}, not a tandem JobSpec; submit "
                    f"jobs with tandem (trainer.fit() with TANDEM_ADDRESS set)."
                )
            try:
                spec.runner.check_loadable()
            except Exception as e:
                raise PayloadError(_describe_load_error(e, working_dir)) from e
        return spec

    def submit(
        self,
        payload_b64: str,
        *,
        priority: int | None = None,
        tags: list[str] | None = None,
        name: str | None = None,
        runtime_env: dict[str, Any] | None = None,
    ) -> JobRecord:
        """Loads, records and queues a job.

        Raises:
            UploadTooLargeError: the payload is over the limit.
            PayloadError: it does not load here (a missing module, not a JobSpec, ...).
            ConfigError: an unknown working_dir package, or a job that can never fit.
        """
        if len(payload_b64) > self.config.max_upload_bytes * 4 // 3 + 4:
            raise UploadTooLargeError(self._too_large(len(payload_b64) * 3 // 4))
        try:
            raw = base64.b64decode(payload_b64, validate=True)
        except (binascii.Error, ValueError) as e:
            raise PayloadError(f"payload is not base64 text ({e}); send "
                               f"base64(cloudpickle.dumps(job_spec))") from e
        env = dict(runtime_env or {})
        working_dir = self._working_dir(env.get("working_dir"))
        spec = self._load(raw, working_dir)
        spec = dataclasses.replace(
            spec,
            priority=spec.priority if priority is None else priority,
            tags=tuple(dict.fromkeys(tuple(spec.tags) + tuple(tags or ()))),
            name=name or spec.name,
        )
        self.cluster.check_feasible(spec.bundles, spec.strategy)
        job_id = new_id("job_")
        record = JobRecord(
            job_id=job_id, name=spec.name, state="PENDING", submitted_at=time.time(),
            priority=spec.priority, tags=spec.tags, spec=raw,
            spec_json=self._spec_json(spec, env),
        )
        self.store.create_job(record)
        self._queue(job_id, spec, working_dir, env.get("env_vars") or {}, next_seq=0, summary={})
        return record

    def _working_dir(self, package_id: str | None) -> str | None:
        if not package_id:
            return None
        if not self.has_package(package_id):
            raise ConfigError(
                f"runtime_env.working_dir names the package {package_id!r}, which this server "
                f"does not have; upload it first with PUT /api/packages/{package_id} (the "
                f"tandem client does this for you)."
            )
        return self.package_dir(package_id)

    @staticmethod
    def _spec_json(spec: JobSpec, env: dict[str, Any]) -> dict[str, Any]:
        meta = {k: v for k, v in dict(spec.metadata).items()
                if isinstance(v, (str, int, float, bool)) or v is None}
        return {
            "bundles": [dict(b) for b in spec.bundles],
            "num_workers": len(spec.bundles),
            "strategy": spec.strategy,
            "runner": type(spec.runner).__name__,
            "metadata": meta,
            "runtime_env": {"working_dir": env.get("working_dir"),
                            "env_vars": sorted(env.get("env_vars") or {})},
            "env_vars": env.get("env_vars") or {},
        }

    def _queue(
        self,
        job_id: str,
        spec: JobSpec,
        working_dir: str | None,
        env_vars: dict[str, str],
        next_seq: int,
        summary: dict[str, Any],
    ) -> None:
        spec.runner.apply_runtime_env(working_dir, env_vars)
        run_path = dict(spec.metadata).get("run_path")
        summary = dict(summary)
        if run_path:
            summary.setdefault("path", run_path)
        with self._lock:
            self._summaries[job_id] = summary
        self.hub.open(job_id, "PENDING", next_seq)
        try:
            self.service.submit(spec, job_id=job_id)
        except BaseException as e:
            self.hub.drop(job_id)
            self.store.set_state(job_id, "FAILED", time.time(), f"{type(e).__name__}: {e}",
                                 traceback=traceback.format_exc())
            raise

    # ------------------------------------------------------------------ restart safety

    def _recover(self) -> list[str]:
        """Re-queues the jobs a previous server left PENDING, RUNNING or RESTARTING."""
        requeued = []
        offset = 0
        records: list[JobRecord] = []
        while True:
            page = self.store.list_jobs(states=ACTIVE_STATES, limit=1000, offset=offset, order="asc")
            records.extend(page)
            if len(page) < 1000:
                break
            offset += 1000
        for rec in records:
            full = self.store.get_job(rec.job_id)
            if full is None or full.spec is None:
                continue
            now = time.time()
            env = dict((full.spec_json or {}).get("runtime_env") or {})
            env_vars = dict((full.spec_json or {}).get("env_vars") or {})
            try:
                working_dir = self._working_dir(env.get("working_dir"))
                spec = self._load(full.spec, working_dir)
                spec = dataclasses.replace(spec, priority=full.priority, tags=full.tags,
                                           name=full.name)
            except Exception as e:  # noqa: BLE001
                self.store.set_state(rec.job_id, "FAILED", now,
                                     f"could not re-queue the job after a server restart: {e}",
                                     traceback=traceback.format_exc())
                continue
            summary = dict(full.result or {})
            if rec.state != "PENDING":
                spec.runner.on_requeue(summary.get("checkpoint_path"))
                self.store.set_state(rec.job_id, "PENDING", now,
                                     reason=f"re-queued after a server restart (was {rec.state})")
            try:
                self._queue(rec.job_id, spec, working_dir, env_vars,
                            next_seq=self._next_seq(rec.job_id), summary=summary)
            except Exception:
                logger.exception("could not re-queue job %s", rec.job_id)
                continue
            requeued.append(rec.job_id)
        if requeued:
            logger.warning("re-queued %d job(s) after a restart: %s", len(requeued), requeued)
        return requeued

    def _next_seq(self, job_id: str) -> int:
        after = -1
        while True:
            page = self.store.get_reports(job_id, after_seq=after, limit=10_000)
            if not page:
                return after + 1
            after = page[-1].seq

    # ------------------------------------------------------------------ job events

    def _on_job_event(self, job: Job, kind: str, payload: Any) -> None:
        """The service's subscriber: called on the job's thread, in order."""
        job_id = job.job_id
        if self._detached or job_id not in self._summaries:
            return  # not a server job: a nested job a worker started (untracked)
        now = time.time()
        if kind == "status":
            status: JobStatus = payload
            if status.is_terminal:
                self._on_end(job, status, now)
                return
            if status is JobStatus.PENDING:
                return  # recorded at submission (or at re-queue)
            self.writer.put(("state", job_id, status.value, now, None, None, None))
            self.hub.status(job_id, status.value, now)
        elif kind == "reports":
            first = self.hub.reports(job_id, payload)
            if first < 0:
                return
            self.writer.put(("reports", job_id, [
                ReportRecord(job_id, first + i, row, now, 0) for i, row in enumerate(payload)
            ]))
            summary = self._summaries.get(job_id)
            if summary is not None and "log_paths" not in summary and job.log_paths:
                summary["log_paths"] = {str(r): p for r, p in job.log_paths.items()}
                self.writer.put(("update", job_id, {"result": dict(summary)}))
        else:
            if kind == "checkpoint":
                self._on_checkpoint(job_id, payload)
            self.hub.event(job_id, kind, payload)

    def _on_checkpoint(self, job_id: str, payload: Any) -> None:
        try:
            iteration, ckpt, _metrics = payload
            path = str(ckpt.path)
        except Exception:  # noqa: BLE001 - not a train checkpoint event
            return
        summary = self._summaries.get(job_id)
        if summary is None:
            return
        summary["checkpoint_path"] = path
        summary["checkpoint_iteration"] = iteration
        summary.setdefault("checkpoints", []).append(path)
        self.writer.put(("update", job_id, {"result": dict(summary)}))

    def _on_end(self, job: Job, status: JobStatus, now: float) -> None:
        job_id = job.job_id
        outcome = job.outcome or JobOutcome(status)
        summary = dict(self._summaries.get(job_id) or {})
        if job.log_paths:
            summary["log_paths"] = {str(r): p for r, p in job.log_paths.items()}
        value = outcome.value
        metrics = getattr(value, "metrics", None)
        if isinstance(metrics, dict):
            summary["metrics"] = _jsonable(metrics)
        ckpt = getattr(value, "checkpoint", None)
        if ckpt is not None and getattr(ckpt, "path", None):
            summary["checkpoint_path"] = str(ckpt.path)
        if getattr(value, "path", None):
            summary["path"] = str(value.path)
        error = tb = None
        if outcome.error is not None:
            err = outcome.error
            error = str(err).split("\n\nWorker traceback", 1)[0]
            tb = getattr(err, "worker_traceback", None) or "".join(
                traceback.format_exception(type(err), err, err.__traceback__))
        try:
            pickled: bytes | None = cloudpickle.dumps(outcome)
        except Exception:  # noqa: BLE001 - an unpicklable value: clients get the summary
            pickled = None
        with self._lock:
            self._outcomes[job_id] = pickled
            while len(self._outcomes) > _OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
        self.writer.put(("update", job_id, {"result": summary}))
        self.writer.put(("state", job_id, status.value, now, error, tb, None))
        self.hub.status(job_id, status.value, now)
        self.hub.end(job_id, status.value, error)
        self.writer.put(("call", lambda: self._after_stored(job_id)))

    def _after_stored(self, job_id: str) -> None:
        self.hub.drop(job_id)
        self.service.forget(job_id)
        with self._lock:
            self._summaries.pop(job_id, None)

    def _running_pids(self) -> dict[str, dict[int, int]]:
        out = {}
        for job in self.service.list():
            if job.status in (JobStatus.RUNNING, JobStatus.RESTARTING):
                try:
                    pids = job.spec.runner.worker_pids()
                except Exception:  # noqa: BLE001
                    continue
                if pids:
                    out[job.job_id] = pids
        return out

    def _on_usage(self, samples: list[UsageSample]) -> None:
        self.writer.put(("usage", samples))

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

    def get_settled(self, job_id: str) -> tuple[JobRecord, str | None]:
        """The stored job and its live state; a job that just ended is stored first, so
        the record (transitions, result, error) agrees with the state shown."""
        rec = self.get(job_id)
        live = self.live_state(job_id)
        if live is not None and live != rec.state and JobStatus(live).is_terminal:
            self.writer.flush(10.0)
            rec = self.get(job_id)
        return rec, live

    def stop(self, job_id: str) -> None:
        self.get(job_id)
        try:
            self.service.stop(job_id)
        except JobNotFoundError:
            pass  # already finished (history): nothing to stop

    def outcome_bytes(self, job_id: str) -> bytes | None:
        """The pickled ``JobOutcome`` of a finished job; None while it runs."""
        with self._lock:
            if job_id in self._outcomes and self._outcomes[job_id] is not None:
                return self._outcomes[job_id]
        rec = self.get(job_id)
        if not rec.is_terminal:
            return None
        return cloudpickle.dumps(_outcome_from_record(rec))

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
            run_path = (rec.result or {}).get("path") or rec.spec_json.get("metadata", {}).get("run_path")
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
            "jobs": [
                {"job_id": j.job_id, "name": j.name, "state": j.status.value,
                 "bundles": [dict(b) for b in j.bundles],
                 "usage": [usage_dict(s) for s in latest.get(j.job_id, [])]}
                for j in running
            ],
        }


def _jsonable(d: dict) -> dict:
    from tandem.jobs.store.base import normalize_json

    try:
        return normalize_json(d)
    except TypeError:
        return {k: (v if isinstance(v, (int, float, str, bool)) or v is None else repr(v))
                for k, v in d.items()}


def _outcome_from_record(rec: JobRecord) -> JobOutcome:
    """A ``JobOutcome`` rebuilt from the store (jobs that ended under an earlier server)."""
    status = JobStatus(rec.state)
    summary = rec.result or {}
    error: BaseException | None = None
    if status is JobStatus.FAILED:
        error = TandemError(rec.error or "the job failed")
    if rec.spec_json.get("runner") == "TrainController":
        from tandem.train.api.checkpoint import Checkpoint
        from tandem.train.api.errors import TrainingFailedError
        from tandem.train.api.result import Result

        if status is JobStatus.FAILED:
            error = TrainingFailedError(rec.error or "the job failed",
                                        worker_traceback=rec.traceback)
        path = summary.get("checkpoint_path")
        value: Any = Result(
            metrics=summary.get("metrics"),
            checkpoint=Checkpoint(path) if path else None,
            path=summary.get("path") or "",
            error=error,
            best_checkpoints=[(Checkpoint(p), {}) for p in summary.get("checkpoints", [])],
        )
        return JobOutcome(status, value=value, error=error)
    return JobOutcome(status, value=None, error=error)
