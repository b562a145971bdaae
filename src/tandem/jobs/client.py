"""``RemoteJobService``: the job service of a train server, spoken to over HTTP.

``get_service()`` returns one when ``TANDEM_ADDRESS`` is set or ``tandem.init(address=...)``
was called, so ``trainer.fit()`` submits to the server with no other code change. It has
the methods of ``LocalJobService`` that the layers above use (``submit``, ``get``, ``list``,
``stop``, ``forget``), and its ``RemoteJob`` has the fields ``JobHandle`` reads (``status``,
``outcome``, ``reports``, ``cond``, ``name``, ``job_id``), kept up to date by following the
job's server-sent event stream on a background thread.

What travels: the ``JobSpec`` cloudpickled without its ``listener`` (the listener stays in
this process and is driven from the event stream). ``runtime_env={"working_dir": ...}``
uploads a folder (``.gitignore`` honoured, size-limited by the server) so that the
user's own modules import on the server.
"""

from __future__ import annotations

import base64
import dataclasses
import fnmatch
import hashlib
import io
import json
import logging
import os
import threading
import time
import zipfile
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import cloudpickle

from tandem._core.errors import ConfigError, JobNotFoundError, TandemError
from tandem.jobs.spec import JobOutcome, JobSpec, JobStatus

logger = logging.getLogger(__name__)

DEFAULT_PORT = 8267
ADDRESS_ENV = "TANDEM_ADDRESS"
TOKEN_ENV = "TANDEM_TOKEN"
#: ``tandem submit`` sets these for the script it runs.
PRIORITY_ENV = "TANDEM_JOB_PRIORITY"
TAGS_ENV = "TANDEM_JOB_TAGS"
SUBMIT_RECORD_ENV = "TANDEM_SUBMIT_RECORD"
_ALWAYS_IGNORED = (".git", "__pycache__", "*.pyc", ".tandem", ".venv", "venv", ".mypy_cache",
                   ".pytest_cache", ".ruff_cache", "*.egg-info")


class ServerUnavailableError(TandemError, ConnectionError):
    """The train server could not be reached."""


# --------------------------------------------------------------------------- addresses


def server_file_path() -> str:
    """``~/.tandem/server.json``: where a local server writes its address and token."""
    return os.path.join(os.path.expanduser("~"), ".tandem", "server.json")


def read_server_file() -> dict[str, Any] | None:
    try:
        with open(server_file_path()) as f:
            info = json.load(f)
        return info if isinstance(info, dict) else None
    except (OSError, ValueError):
        return None


def normalize_address(address: str) -> str:
    """``host:port``, ``http://host:port`` or ``host`` -> ``http://host:port``."""
    text = address.strip().rstrip("/")
    if not text:
        raise ConfigError("The train server address is empty; give host:port, e.g. 127.0.0.1:8267.")
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"The train server address {address!r} is not valid; give host:port "
            f"(e.g. 127.0.0.1:8267) or http://host:port."
        )
    try:
        port = parts.port or DEFAULT_PORT
    except ValueError as e:
        raise ConfigError(f"The train server address {address!r} has a bad port: {e}.") from e
    host = parts.hostname
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}:{port}"


def _same_server(a: str, b: str) -> bool:
    local = {"127.0.0.1", "localhost", "::1", "[::1]", "0.0.0.0"}
    pa, pb = urlsplit(a), urlsplit(b)
    if pa.port != pb.port:
        return False
    return pa.hostname == pb.hostname or (pa.hostname in local and pb.hostname in local)


def resolve_connection(address: str | None = None, token: str | None = None) -> tuple[str, str | None]:
    """The server URL and token to use.

    ``address``: given, else ``$TANDEM_ADDRESS``; ``"auto"`` means the local server named in
    ``~/.tandem/server.json``. ``token``: given, else ``$TANDEM_TOKEN``, else the token in
    ``~/.tandem/server.json`` when its address is the same server.
    """
    address = address or os.environ.get(ADDRESS_ENV) or None
    info = read_server_file()
    if address is None or address == "auto":
        if info is None or "address" not in info:
            raise ConfigError(
                f"No train server address given and no local server found ({server_file_path()} "
                f"is missing). Start one with `tandem server start`, or set {ADDRESS_ENV}=host:port."
            )
        address = str(info["address"])
    url = normalize_address(address)
    token = token or os.environ.get(TOKEN_ENV) or None
    if token is None and info is not None and info.get("token"):
        if _same_server(url, normalize_address(str(info.get("address", "")))):
            token = str(info["token"])
    return url, token


# --------------------------------------------------------------------------- HTTP


class ServerConnection:
    """An httpx client that turns transport and HTTP errors into clear ``TandemError``s."""

    def __init__(self, url: str, token: str | None, timeout_s: float = 30.0) -> None:
        import httpx

        self.url = url
        self.token = token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._httpx = httpx
        self.http = httpx.Client(base_url=url, headers=headers, timeout=timeout_s)

    def close(self) -> None:
        self.http.close()

    def unreachable(self, e: BaseException) -> ServerUnavailableError:
        reason = "connection refused" if isinstance(e, self._httpx.ConnectError) else (
            f"{type(e).__name__}: {e}" if str(e) else type(e).__name__)
        if "refused" in str(e).lower():
            reason = "connection refused"
        return ServerUnavailableError(
            f"cannot reach the tandem server at {self.url} ({reason}). Start it with "
            f"`tandem server start`, or unset {ADDRESS_ENV} to train in this process."
        )

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """Sends a request; returns the httpx response (2xx only)."""
        try:
            r = self.http.request(method, path, **kwargs)
        except self._httpx.TransportError as e:
            raise self.unreachable(e) from None
        self.check(r)
        return r

    def json(self, method: str, path: str, **kwargs: Any) -> Any:
        return self.request(method, path, **kwargs).json()

    def check(self, r: Any) -> None:
        if r.status_code < 400:
            return
        try:
            r.read()
            detail = r.json().get("detail", r.text)
        except Exception:  # noqa: BLE001 - not JSON
            detail = r.text
        if isinstance(detail, list):  # FastAPI validation errors
            detail = "; ".join(
                f"{'.'.join(str(x) for x in d.get('loc', []))}: {d.get('msg')}" for d in detail
            )
        if r.status_code == 401:
            raise TandemError(
                f"the tandem server at {self.url} refused the request: {detail}. Pass the "
                f"server's token with tandem.init(token=...) or {TOKEN_ENV} (a local server "
                f"writes it to {server_file_path()})."
            )
        if r.status_code == 404:
            raise JobNotFoundError(str(detail))
        if r.status_code in (413, 422):
            raise ConfigError(str(detail))
        raise TandemError(f"the tandem server at {self.url} answered {r.status_code}: {detail}")


def parse_sse(lines: Iterator[str]) -> Iterator[tuple[str, str]]:
    """``(event, data)`` pairs from the lines of a text/event-stream."""
    event, data = "message", []
    for line in lines:
        if line == "":
            if data:
                yield event, "\n".join(data)
            event, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            event = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


# --------------------------------------------------------------------------- working_dir


def _load_ignore(root: str, rel_dir: str) -> list[tuple[str, bool, bool, bool]]:
    """Patterns of ``rel_dir/.gitignore``: (pattern, negated, dir_only, anchored)."""
    path = os.path.join(root, rel_dir, ".gitignore")
    out = []
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return out
    for raw in lines:
        line = raw.rstrip()
        if not line or line.startswith("#"):
            continue
        neg = line.startswith("!")
        if neg:
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if anchored and rel_dir:
            line = f"{rel_dir}/{line}"
        out.append((line, neg, dir_only, anchored))
    return out


def _ignored(rel: str, is_dir: bool, patterns: list[tuple[str, bool, bool, bool]]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    result = False
    for pat, neg, dir_only, anchored in patterns:
        if dir_only and not is_dir:
            continue
        if anchored:
            hit = fnmatch.fnmatchcase(rel, pat) or fnmatch.fnmatchcase(rel, pat.replace("**/", ""))
        else:
            hit = fnmatch.fnmatchcase(name, pat)
        if hit:
            result = not neg
    return result


def package_working_dir(path: str, limit_bytes: int | None = None) -> tuple[str, bytes]:
    """Zips a folder for upload; returns ``(package_id, zip_bytes)``.

    Files and folders matched by ``.gitignore`` files (and ``.git``, ``__pycache__``,
    virtual environments) are left out. The id is a hash of the content.

    Raises:
        ConfigError: ``path`` is not a folder, or the files exceed ``limit_bytes``.
    """
    root = os.path.abspath(os.path.expanduser(path))
    if not os.path.isdir(root):
        raise ConfigError(
            f"runtime_env={{'working_dir': {path!r}}}: {root} is not a folder; give the folder "
            f"holding your modules, e.g. '.'."
        )
    base = [(p, False, False, False) for p in _ALWAYS_IGNORED]
    files: list[tuple[str, str]] = []
    total = 0
    stack: list[tuple[str, list]] = [("", base + _load_ignore(root, ""))]
    while stack:
        rel_dir, patterns = stack.pop()
        try:
            entries = sorted(os.scandir(os.path.join(root, rel_dir)), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if entry.is_symlink() and entry.is_dir():
                continue
            is_dir = entry.is_dir()
            if _ignored(rel, is_dir, patterns):
                continue
            if is_dir:
                stack.append((rel, patterns + _load_ignore(root, rel)))
            elif entry.is_file():
                total += entry.stat().st_size
                if limit_bytes is not None and total > limit_bytes:
                    raise ConfigError(
                        f"runtime_env working_dir {root} holds more than the server's upload "
                        f"limit of {limit_bytes / 2**20:.0f} MiB (after .gitignore). Leave data "
                        f"and outputs out with a .gitignore, point working_dir at the folder with "
                        f"your code only, or start the server with a larger --max-upload-mb."
                    )
                files.append((rel, entry.path))
    digest = hashlib.sha256()
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for rel, full in sorted(files):
            with open(full, "rb") as f:
                data = f.read()
            digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (os.stat(full).st_mode & 0o777) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return digest.hexdigest()[:32], buf.getvalue()


def check_runtime_env(runtime_env: Any) -> dict[str, Any]:
    """Validates ``runtime_env`` (``{"working_dir": str, "env_vars": {str: str}}``)."""
    if runtime_env is None:
        return {}
    if not isinstance(runtime_env, Mapping):
        raise ConfigError(
            f"runtime_env must be a dict such as {{'working_dir': '.', 'env_vars': {{...}}}}, "
            f"got {type(runtime_env).__name__}."
        )
    unknown = set(runtime_env) - {"working_dir", "env_vars"}
    if unknown:
        raise ConfigError(
            f"runtime_env has unknown key(s) {sorted(unknown)}; allowed: 'working_dir', 'env_vars'."
        )
    wd = runtime_env.get("working_dir")
    if wd is not None and not isinstance(wd, (str, os.PathLike)):
        raise ConfigError(f"runtime_env['working_dir'] must be a folder path, got {wd!r}.")
    env = runtime_env.get("env_vars") or {}
    if not isinstance(env, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in env.items()
    ):
        raise ConfigError(
            f"runtime_env['env_vars'] must map names to strings, e.g. {{'MY_FLAG': '1'}}; "
            f"got {env!r:.80}."
        )
    out: dict[str, Any] = {"env_vars": dict(env)}
    if wd is not None:
        out["working_dir"] = os.path.abspath(os.path.expanduser(os.fspath(wd)))
    return out


# --------------------------------------------------------------------------- jobs


class RemoteJob:
    """A job on a train server, as ``JobHandle`` sees it.

    ``status`` is fetched on demand; the first use of ``cond`` (``wait()``, ``results()``)
    or a listener starts a thread that follows the job's event stream and fills
    ``reports``, ``status`` and, at the end, ``outcome``.
    """

    def __init__(
        self,
        service: RemoteJobService,
        info: Mapping[str, Any],
        listener: Callable[[str, Any], None] | None = None,
    ) -> None:
        self._service = service
        self.job_id: str = info["job_id"]
        self.name: str = info.get("name", "")
        self.priority: int = info.get("priority", 0)
        self.tags: tuple[str, ...] = tuple(info.get("tags", ()))
        self._status = JobStatus(info.get("state", "PENDING"))
        self.info = dict(info)
        self.listener = listener
        self.reports: list[dict] = []
        self.reports_dropped = 0  # iter_reports reads it (a server job's reports all stay)
        self.outcome: JobOutcome | None = None
        self.log_paths: dict[int, str] = {}
        self._cond = threading.Condition()
        self._last_seq = -1
        self._told = JobStatus.PENDING
        self._follower: threading.Thread | None = None
        self._follow_lock = threading.Lock()

    # -- what JobHandle reads ---------------------------------------------------------------
    @property
    def status(self) -> JobStatus:
        if self._follower is None and not self._status.is_terminal:
            info = self._service._conn.json("GET", f"/api/jobs/{self.job_id}")
            self._status = JobStatus(info["state"])
        return self._status

    @property
    def cond(self) -> threading.Condition:
        self.follow()
        return self._cond

    def read_logs(self) -> str:
        return self._service.logs(self.job_id)

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
                with conn.http.stream(
                    "GET", f"/api/jobs/{self.job_id}/events",
                    params={"after_seq": self._last_seq},
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
                    self._end(JobOutcome(JobStatus.FAILED, error=conn.unreachable(e)),
                              JobStatus.FAILED)
                    return
            except Exception as e:  # noqa: BLE001 - never leave a waiter hanging
                self._end(JobOutcome(JobStatus.FAILED, error=e), JobStatus.FAILED)
                return
            time.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _on_event(self, event: str, data: dict) -> bool:
        """Applies one event; True at the end of the stream."""
        if event == "status":
            status = JobStatus(data["state"])
            if status.is_terminal:
                return False  # the "end" event follows with the outcome
            with self._cond:
                self._status = status
                self._cond.notify_all()
            if status != self._told and self.listener is not None:
                self._told = status  # the listener hears every state, from PENDING on
                self.listener("status", status)
        elif event == "reports":
            first = int(data["first_seq"])
            rows = data["rows"][max(0, self._last_seq + 1 - first):]
            if not rows:
                return False
            with self._cond:
                self.reports.extend(rows)
                self._last_seq = first + len(data["rows"]) - 1
                self._cond.notify_all()
            if self.listener is not None:
                self.listener("reports", rows)
        elif event == "event":
            if self.listener is not None:
                try:
                    payload = cloudpickle.loads(base64.b64decode(data["pickle"]))
                except Exception as e:  # noqa: BLE001
                    logger.warning("job %s: could not load a %r event: %s", self.job_id,
                                   data.get("kind"), e)
                    return False
                self.listener(data["kind"], payload)
        elif event == "end":
            status = JobStatus(data["state"])
            self._end(self._service._outcome(self.job_id, status, data), status)
            return True
        return False

    def _end(self, outcome: JobOutcome, status: JobStatus) -> None:
        with self._cond:
            self.outcome = outcome
            self._status = status
            self._cond.notify_all()
        if self.listener is not None:
            self.listener("status", status)

    def __repr__(self) -> str:
        return f"RemoteJob(job_id={self.job_id!r}, name={self.name!r})"


class _ClusterView:
    """``service.cluster`` for a remote service: the server's resources, read-only."""

    def __init__(self, service: RemoteJobService) -> None:
        self._service = service

    def resources(self) -> dict[str, float]:
        return dict(self._service.cluster_info()["resources"])

    def available(self) -> dict[str, float]:
        return dict(self._service.cluster_info()["available"])

    def check_feasible(self, bundles: Any, strategy: str = "PACK") -> None:
        """The server checks at submission."""

    def prewarm(self, preload: Any = ()) -> None:
        """The server warms its own cluster."""


class RemoteJobService:
    """The job service of a train server (see the module docstring).

    Args:
        address: ``host:port`` (or ``http://host:port``, or ``"auto"``); default
            ``$TANDEM_ADDRESS``.
        token: default ``$TANDEM_TOKEN``, else the local server's ``~/.tandem/server.json``.
        runtime_env: ``{"working_dir": ".", "env_vars": {...}}`` for every job submitted.
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
    ) -> None:
        url, token = resolve_connection(address, token)
        self.address = url
        self._conn = ServerConnection(url, token)
        self.runtime_env = check_runtime_env(runtime_env)
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

    # -- the LocalJobService surface -------------------------------------------------------
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

    def list(self, state: str | None = None, limit: int = 1000) -> list[RemoteJob]:
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
        self._conn.close()

    # -- internals -------------------------------------------------------------------------
    def _outcome(self, job_id: str, status: JobStatus, end: Mapping[str, Any]) -> JobOutcome:
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
        if not env:
            return {}
        out: dict[str, Any] = {}
        if env.get("env_vars"):
            out["env_vars"] = env["env_vars"]
        if env.get("working_dir"):
            with self._lock:
                if self._package is None:
                    limit = self.health().get("max_upload_bytes")
                    pkg_id, data = package_working_dir(env["working_dir"], limit)
                    self._conn.request(
                        "PUT", f"/api/packages/{pkg_id}", content=data,
                        headers={"Content-Type": "application/zip"},
                    )
                    self._package = {"id": pkg_id}
                out["working_dir"] = self._package["id"]
        return out

    def __repr__(self) -> str:
        return f"RemoteJobService({self.address!r})"
