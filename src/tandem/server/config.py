"""``ServerConfig``: how a train server runs (what `tandem server start` flags set)."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tandem._core.errors import ConfigError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8267
DEFAULT_STORAGE = os.path.join("~", ".tandem", "server")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


@dataclass(frozen=True)
class ServerConfig:
    """A train server's settings.

    Args:
        host, port: where the HTTP API listens (loopback by default: see docs/server.md).
        storage: the server's folder: the SQLite job store, uploaded packages, its log and
            its token.
        db: a job store URL (``postgresql://...``); default: ``<storage>/jobs.db`` (SQLite).
        num_cpus, num_gpus, memory, resources: the logical resources of its local cluster.
        ray_address: run jobs on this Ray cluster (``"auto"`` or ``host:port``) instead of
            a local cluster; its resources are Ray's own.
        ray_autoscaling: the Ray cluster autoscales (see ``RayCluster(autoscaling=True)``).
        max_upload_bytes: the largest request body (a job payload or a working_dir upload).
        reserve_after_s: how long a blocked job lets smaller ones backfill ahead of it.
        scheduling: the admission policy: ``"fifo"`` (default), ``"fair"`` (quotas and
            fair share) or ``"priority"`` (that, plus preemption); docs/scheduling.md.
        quotas: per-owner quotas, ``{owner: {"cpus": 8, "gpus": 2, "memory": 64e9,
            "queued_jobs": 100}}`` (owner ``"*"``: everyone else); needs ``"fair"`` or
            ``"priority"``.
        usage_interval_s: how often worker CPU/memory/GPU use is sampled (0: never).
        expose: allow ``host`` to be an address other machines reach (``--expose``).
        tls_cert, tls_key: serve HTTPS with this certificate and key (PEM files).
    """

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    storage: str = DEFAULT_STORAGE
    db: str | None = None
    num_cpus: float | None = None
    num_gpus: float | None = None
    memory: float | None = None
    resources: Mapping[str, float] = field(default_factory=dict)
    ray_address: str | None = None
    ray_autoscaling: bool = False
    max_upload_bytes: int = 100 * 2**20
    reserve_after_s: float = 30.0
    scheduling: str = "fifo"
    quotas: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    usage_interval_s: float = 5.0
    expose: bool = False
    tls_cert: str | None = None
    tls_key: str | None = None

    @property
    def exposed(self) -> bool:
        """True when ``host`` is not a loopback address."""
        return not _is_loopback(self.host)

    def admission_policy(self) -> Any:
        """The job service's ``AdmissionPolicy`` for ``scheduling`` and ``quotas``."""
        from tandem.jobs.admission import make_policy
        from tandem.jobs.scheduler import GangScheduler

        if self.scheduling == "fifo":
            if self.quotas:
                raise ConfigError("--quotas needs --scheduling fair or priority (the FIFO "
                                  "policy has no quotas).")
            return GangScheduler(reserve_after_s=self.reserve_after_s)
        kwargs: dict[str, Any] = {"reserve_after_s": self.reserve_after_s}
        if self.quotas:
            kwargs["quotas"] = dict(self.quotas)
        return make_policy(self.scheduling, **kwargs)

    def __post_init__(self) -> None:
        if self.scheduling not in ("fifo", "fair", "priority"):
            raise ConfigError(f"--scheduling {self.scheduling!r}: use fifo, fair or priority.")
        self.admission_policy()  # refuses bad quotas before the server starts
        if self.exposed and not self.expose:
            raise ConfigError(
                f"--host {self.host} would let other machines reach this server (anyone with "
                f"the token runs code here). If that is what you want, say so with --expose, "
                f"and give --tls-cert/--tls-key so the token travels encrypted; to stay on this "
                f"machine, leave --host at 127.0.0.1.")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ConfigError("--tls-cert and --tls-key go together: give the certificate and "
                              "its private key (PEM files).")
        for flag, path in (("--tls-cert", self.tls_cert), ("--tls-key", self.tls_key)):
            if path is not None and not os.path.isfile(path):
                raise ConfigError(f"{flag} {path}: no such file; give a PEM file.")
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 0 <= self.port < 65536:
            raise ConfigError(f"--port {self.port!r}: give a TCP port between 0 and 65535.")
        if self.ray_address is None and self.ray_autoscaling:
            raise ConfigError("--ray-autoscaling is about a Ray cluster: give --ray-address "
                              "too (e.g. --ray-address auto).")
        if self.ray_address is not None:
            local = [flag for flag, v in (("--num-cpus", self.num_cpus),
                                          ("--num-gpus", self.num_gpus),
                                          ("--memory", self.memory),
                                          ("--resources", self.resources or None)) if v is not None]
            if local:
                raise ConfigError(
                    f"{', '.join(local)} set a local cluster's resources, but "
                    f"--ray-address {self.ray_address} runs jobs on Ray, whose resources are "
                    f"its own (`ray start --num-cpus ...`). Drop {', '.join(local)}.")
        if self.max_upload_bytes <= 0:
            raise ConfigError(f"--max-upload-mb must be > 0, got {self.max_upload_bytes / 2**20}.")

    @property
    def storage_path(self) -> str:
        return os.path.abspath(os.path.expanduser(self.storage))

    @property
    def db_url(self) -> str:
        if self.db:
            return self.db
        return "sqlite:///" + os.path.join(self.storage_path, "jobs.db")
