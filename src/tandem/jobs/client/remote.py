"""``RemoteJobService`` / ``RemoteJob``: the job service of a train server and its jobs,
as ``tandem.jobs.contract.JobService`` / ``JobView`` (see ``tandem.jobs.client``)."""

from __future__ import annotations

import base64
import builtins
import dataclasses
import io
import json
import logging
import os
import queue
import sys
import threading
import time
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import cloudpickle

from tandem._core.errors import ConfigError, TandemError
from tandem.jobs.client.connection import ServerConnection, parse_sse
from tandem.jobs.client.discovery import (
    PRIORITY_ENV,
    SUBMIT_RECORD_ENV,
    TAGS_ENV,
    resolve_connection,
)
from tandem.jobs.client.packaging import (
    DEFAULT_WORKING_DIR_MAX_BYTES,
    DEFAULT_WORKING_DIR_MAX_FILES,
    check_runtime_env,
    package_working_dir,
    script_folder,
)
from tandem.jobs.events import Asked, JobListener, Reported, StatusChanged, from_wire
from tandem.jobs.spec import JobCall, JobOutcome, JobSpec, JobStatus
from tandem.jobs.view import DEFAULT_REPORT_WINDOW, JobState, check_report_window

logger = logging.getLogger(__name__)


def _say(line: str) -> None:
    """One line for the person running the script (stderr: stdout stays theirs)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


#: Ray Tune's words for how a trial ended, which ``/api/jobs`` shows a trial's job with
#: (``tandem.server.vocabulary``), as job states: ``TERMINATED`` is a finished or stopped
#: trial (the event stream's end names which); ``ERROR`` a failed one.
_TRIAL_WORDS = {"TERMINATED": JobStatus.FINISHED, "ERROR": JobStatus.FAILED}


def shown_status(word: str) -> JobStatus:
    """The job state of a job as ``/api/jobs`` shows it (a Tune trial's job that ended is
    shown with Ray's trial word: a quick trial can end before its submission is answered)."""
    got = _TRIAL_WORDS.get(word)
    return got if got is not None else JobStatus(word)


class RemoteJob(JobState):
    """A job on a train server (a ``JobView``).

    ``status`` is fetched on demand until the job is followed; the first read that waits
    (``wait_outcome``, ``read_reports``) or a listener starts a thread that follows the
    job's event stream and feeds the state (reports, status, and at the end the outcome).
    """

    def __init__(
        self,
        service: RemoteJobService,
        info: Mapping[str, Any],
        listener: JobListener | None = None,
    ) -> None:
        super().__init__(str(info["job_id"]), str(info.get("name", "")),
                         status=shown_status(str(info.get("state", "PENDING"))),
                         report_window=service.report_window)
        self._service = service
        self.priority: int = int(info.get("priority", 0))
        self.tags: tuple[str, ...] = tuple(info.get("tags", ()))
        self.info = dict(info)
        self.listener = listener
        self._last_seq = -1
        self._told = JobStatus.PENDING
        self._follower: threading.Thread | None = None
        self._follow_lock = threading.Lock()

    # -- JobView ----------------------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        if self._follower is None and not self._status.is_terminal:
            info = self._service._conn.json("GET", f"/api/jobs/{self.job_id}")
            self._status = shown_status(str(info["state"]))
        return self._status

    def read_logs(self) -> str:
        return self._service.logs(self.job_id)

    def stop(self) -> None:
        self._service.stop(self.job_id)

    def _ensure_fed(self) -> None:
        self.follow()

    # -- following --------------------------------------------------------------------------
    def follow(self) -> None:
        """Starts following the event stream (idempotent)."""
        with self._follow_lock:
            if self._follower is None:
                self._follower = threading.Thread(
                    target=self._follow, name=f"tandem-follow-{self.job_id}", daemon=True
                )
                self._follower.start()

    def _follow(self) -> None:
        conn = self._service._conn
        last_ok = time.monotonic()
        delay = 0.1
        while True:
            try:
                params: dict[str, Any] = {"after_seq": self._last_seq}
                if self.listener is not None:  # the submitter answers the job's questions
                    params["calls"] = "true"
                with conn.http.stream(
                    "GET", f"/api/jobs/{self.job_id}/events",
                    params=params,
                    timeout=conn._httpx.Timeout(10.0, read=None),
                ) as r:
                    conn.check(r)
                    for event, data in parse_sse(r.iter_lines()):
                        last_ok = time.monotonic()
                        delay = 0.1
                        if self._on_event(event, json.loads(data)):
                            return
            except conn._httpx.TransportError as e:
                if time.monotonic() - last_ok > self._service.reconnect_timeout_s:
                    self._finish(JobOutcome(JobStatus.FAILED, error=conn.unreachable(e)))
                    return
            except Exception as e:  # noqa: BLE001 - never leave a waiter hanging
                self._finish(JobOutcome(JobStatus.FAILED, error=e))
                return
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _on_event(self, event: str, data: dict) -> bool:
        """Applies one event; True at the end of the stream."""
        if event == "status":
            status = JobStatus(data["state"])
            if status.is_terminal:
                return False  # the "end" event follows with the outcome
            self._change_status(status)
            if status != self._told and self.listener is not None:
                self._told = status  # the listener hears every state, from PENDING on
                self.listener(StatusChanged(status))
        elif event == "reports":
            first = int(data["first_seq"])
            rows = data["rows"][max(0, self._last_seq + 1 - first):]
            if not rows:
                return False
            self._last_seq = first + len(data["rows"]) - 1
            self._add_reports(rows)
            if self.listener is not None:
                if self._told is JobStatus.PENDING:
                    # it ran, and may have ended, before this stream opened: the listener
                    # hears RUNNING before its reports, as it would have (a tuner drops the
                    # reports of a trial it has not seen start)
                    self._told = JobStatus.RUNNING
                    self.listener(StatusChanged(JobStatus.RUNNING))
                self.listener(Reported(rows))
        elif event == "event":
            if self.listener is not None:
                try:
                    payload = cloudpickle.loads(base64.b64decode(data["pickle"]))
                    job_event = from_wire(str(data["kind"]), payload)
                except Exception as e:  # noqa: BLE001
                    logger.warning("job %s: could not load a %r event: %s", self.job_id,
                                   data.get("kind"), e)
                    return False
                self.listener(job_event)
        elif event == "call":
            self._on_call(data)
        elif event == "end":
            status = JobStatus(data["state"])
            self._finish(self._service._outcome(self.job_id, status, data))
            return True
        return False

    def _on_call(self, data: dict) -> None:
        """A question of the job (``JobContext.ask`` on the server): to the listener, whose
        ``reply`` sends the answer back (sent again after a reconnection until answered)."""
        if self.listener is None:
            return
        call_id = int(data["call_id"])
        try:
            payload = cloudpickle.loads(base64.b64decode(data["pickle"]))
        except Exception as e:  # noqa: BLE001
            logger.warning("job %s: could not load a %r question: %s", self.job_id,
                           data.get("kind"), e)
            self._service.answer_call(self.job_id, call_id, False, f"not loadable: {e}")
            return
        job_id, service = self.job_id, self._service

        def reply(ok: bool, value: object) -> None:
            service.answer_call(job_id, call_id, ok, value)

        self.listener(Asked(str(data["kind"]), JobCall(payload, reply)))

    def _finish(self, outcome: JobOutcome) -> None:
        if self._end(outcome) and self.listener is not None:
            self.listener(StatusChanged(outcome.status))


class _ClusterView:
    """``service.cluster`` for a remote service: the server's resources, read-only."""

    def __init__(self, service: RemoteJobService) -> None:
        self._service = service

    def resources(self) -> dict[str, float]:
        return dict(self._service.cluster_info()["resources"])

    def available(self) -> dict[str, float]:
        return dict(self._service.cluster_info()["available"])

    def check_feasible(self, bundles: Sequence[Mapping[str, float]], strategy: str = "PACK") -> None:
        """The server checks at submission."""

    def prewarm(self, preload: Sequence[str] = ()) -> None:
        """The server warms its own cluster."""


class RemoteJobService:
    """The job service of a train server (see the module docstring).

    Args:
        address: ``host:port`` (or ``http://host:port``, or ``"auto"``); default
            ``$TANDEM_ADDRESS``.
        token: default ``$TANDEM_TOKEN``, else the local server's ``~/.tandem/server.json``.
        runtime_env: ``{"working_dir": ".", "env_vars": {...}}`` for every job submitted.
            Without a ``working_dir`` key, the folder of the script this process runs is
            sent (as ``ray job submit --working-dir`` does; what ``.gitignore`` ignores is
            left out, and past 50 MiB or 5,000 files nothing is sent); this is said once on
            stderr. ``{"working_dir": None}`` sends nothing.
        priority, tags: defaults for every job (``tandem submit --priority/--tag`` set them
            through ``$TANDEM_JOB_PRIORITY`` / ``$TANDEM_JOB_TAGS``).
    """

    def __init__(
        self,
        address: str | None = None,
        token: str | None = None,
        runtime_env: Mapping[str, Any] | None = None,
        priority: int | None = None,
        tags: tuple[str, ...] | None = None,
        reconnect_timeout_s: float = 120.0,
        report_window: int = DEFAULT_REPORT_WINDOW,
    ) -> None:
        self.report_window = check_report_window(report_window)
        url, token = resolve_connection(address, token)
        self.address = url
        self._conn = ServerConnection(url, token)
        self.runtime_env = check_runtime_env(runtime_env)
        explicit = runtime_env is not None and "working_dir" in runtime_env
        self._script_folder = None if explicit else script_folder()
        if priority is None and os.environ.get(PRIORITY_ENV):
            try:
                priority = int(os.environ[PRIORITY_ENV])
            except ValueError:
                raise ConfigError(
                    f"{PRIORITY_ENV}={os.environ[PRIORITY_ENV]!r} is not an integer."
                ) from None
        self.priority = priority
        if tags is None:
            tags = tuple(t for t in os.environ.get(TAGS_ENV, "").split(",") if t)
        self.tags = tuple(tags)
        self.reconnect_timeout_s = reconnect_timeout_s
        self._record_path = os.environ.get(SUBMIT_RECORD_ENV)
        self._package: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.cluster = _ClusterView(self)
        self._answers: queue.SimpleQueue[tuple[str, int, bool, Any] | None] = queue.SimpleQueue()
        self._answerer: threading.Thread | None = None

    # -- the LocalJobService surface -------------------------------------------------------

    @property
    def connection(self) -> ServerConnection:
        """The HTTP connection to the server (address and token), for other APIs it serves
        (the model registry)."""
        return self._conn

    def health(self) -> dict[str, Any]:
        """The server's ``/api/health`` (raises ``ServerUnavailableError`` if it is down)."""
        return self._conn.json("GET", "/api/health")

    def submit(self, spec: JobSpec) -> RemoteJob:
        try:
            payload = cloudpickle.dumps(dataclasses.replace(spec, listener=None))
        except Exception as e:
            raise ConfigError(
                f"Job {spec.name!r} cannot be sent to the train server at {self.address}: "
                f"{type(e).__name__}: {e}. Everything the job refers to (train function, "
                f"config, datasets, callbacks) must pickle with cloudpickle."
            ) from e
        body: dict[str, Any] = {
            "payload": base64.b64encode(payload).decode("ascii"),
            "tags": list(dict.fromkeys(tuple(spec.tags) + self.tags)),
        }
        if self.priority is not None and spec.priority == 0:
            body["priority"] = self.priority
        env = self._runtime_env_ref()
        if env:
            body["runtime_env"] = env
        info = self._conn.json("POST", "/api/jobs", json=body)
        job = RemoteJob(self, info, spec.listener)
        if self._record_path:
            with open(self._record_path, "a") as f:
                f.write(job.job_id + "\n")
        if spec.listener is not None:
            job.follow()
        return job

    def get(self, job_id: str) -> RemoteJob:
        return RemoteJob(self, self._conn.json("GET", f"/api/jobs/{job_id}"))

    def list(self, state: str | None = None, limit: int = 1000) -> builtins.list[RemoteJob]:
        params: dict[str, Any] = {"limit": limit}
        if state is not None:
            params["state"] = state
        data = self._conn.json("GET", "/api/jobs", params=params)
        return [RemoteJob(self, j) for j in data["jobs"]]

    def stop(self, job_id: str) -> None:
        self._conn.json("POST", f"/api/jobs/{job_id}/stop")

    def forget(self, job_id: str) -> None:
        """The server keeps every job in its history; nothing to do here."""

    def logs(self, job_id: str) -> str:
        return str(self._conn.json("GET", f"/api/jobs/{job_id}/logs")["text"])

    def cluster_info(self) -> dict[str, Any]:
        return self._conn.json("GET", "/api/cluster")

    def shutdown(self, timeout_s: float = 0.0) -> None:
        """Closes the connection; jobs on the server keep running."""
        if self._answerer is not None:
            self._answers.put(None)
            self._answerer.join(1.0)
        self._conn.close()

    def answer_call(self, job_id: str, call_id: int, ok: bool, value: object) -> None:
        """Sends the answer to a job's question (from a thread of its own: whoever answers,
        e.g. the tuner's loop, never waits on the network)."""
        with self._lock:
            if self._answerer is None:
                self._answerer = threading.Thread(target=self._send_answers,
                                                  name="tandem-answers", daemon=True)
                self._answerer.start()
        self._answers.put((job_id, call_id, ok, value))

    def _send_answers(self) -> None:
        """Sends the answers ready, all in one request (several trials answered at once)."""
        while True:
            items = [self._answers.get()]
            while True:
                try:
                    items.append(self._answers.get_nowait())
                except queue.Empty:
                    break
            answers = [{"job_id": job_id, "call_id": call_id, "ok": bool(ok),
                        "value": None if value is None else str(value)}
                       for job_id, call_id, ok, value in (i for i in items if i is not None)]
            if answers:
                try:
                    self._conn.request("POST", "/api/calls", json={"answers": answers})
                except Exception as e:  # noqa: BLE001 - the question is sent again on reconnect
                    logger.debug("answers to %d question(s) not sent: %s", len(answers), e)
            if None in items:
                return

    # -- internals -------------------------------------------------------------------------
    def _outcome(self, job_id: str, status: JobStatus, end: Mapping[str, object]) -> JobOutcome:
        try:
            r = self._conn.request("GET", f"/api/jobs/{job_id}/outcome")
            outcome = cloudpickle.loads(r.content)
            if isinstance(outcome, JobOutcome):
                return outcome
        except Exception as e:  # noqa: BLE001 - fall back to the text of the error
            logger.debug("job %s: outcome not loadable here: %s", job_id, e)
        error = None
        if status is JobStatus.FAILED:
            error = TandemError(str(end.get("error") or f"job {job_id} failed on the server"))
        return JobOutcome(status, value=None, error=error)

    def _runtime_env_ref(self) -> dict[str, Any]:
        """The runtime_env as the server takes it (the working_dir uploaded once)."""
        env = self.runtime_env
        out: dict[str, Any] = {}
        if env.get("env_vars"):
            out["env_vars"] = env["env_vars"]
        if env.get("working_dir") or self._script_folder is not None:
            with self._lock:
                if self._package is None:
                    self._package = self._upload_working_dir(env.get("working_dir"))
                if self._package.get("id"):
                    out["working_dir"] = self._package["id"]
        return out

    def _upload_working_dir(self, given: str | None) -> dict[str, Any]:
        """Packs and uploads the working_dir: the one given, else the script's folder
        (capped; too big a folder is not sent, and that is said)."""
        limit = self.health().get("max_upload_bytes")
        if given:
            pkg_id, data = package_working_dir(given, limit,
                                               excludes=self.runtime_env.get("excludes", ()))
        else:
            assert self._script_folder is not None
            folder, script = self._script_folder
            cap = min(int(limit), DEFAULT_WORKING_DIR_MAX_BYTES) if limit else \
                DEFAULT_WORKING_DIR_MAX_BYTES
            try:
                pkg_id, data = package_working_dir(folder, cap, DEFAULT_WORKING_DIR_MAX_FILES,
                                                   self.runtime_env.get("excludes", ()))
            except ConfigError as e:
                _say(f"tandem: not sending {folder} (the folder of {script}) to the train "
                     f"server: {e} Jobs that import your own modules need "
                     f"runtime_env={{'working_dir': ...}} (tandem.init) then.")
                return {}
            count = len(zipfile.ZipFile(io.BytesIO(data)).namelist())
            _say(f"tandem: sending {folder} (the folder of {script}: {count} file"
                 f"{'s' if count != 1 else ''}, {len(data) / 1024:.0f} KiB zipped; what "
                 f".gitignore and .rayignore match left out) to the train server as the jobs' working_dir; "
                 f"tandem.init(runtime_env={{'working_dir': None}}) sends nothing")
        self._conn.request("PUT", f"/api/packages/{pkg_id}", content=data,
                           headers={"Content-Type": "application/zip"})
        return {"id": pkg_id}

    def __repr__(self) -> str:
        return f"RemoteJobService({self.address!r})"
