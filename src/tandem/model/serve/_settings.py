"""``ServeSettings``: how a model is served (what ``tandem serve`` flags set)."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from tandem._core.errors import ConfigError


@dataclass(frozen=True)
class ServeSettings:
    """Args:
        route_prefix: where the model answers (default ``/<name>``): ``POST
            {route_prefix}/predict``, ``GET {route_prefix}``.
        host: the address the HTTP server binds (loopback by default). An address other
            machines reach (``0.0.0.0``, a LAN address) needs ``expose=True``.
        expose: allow ``host`` to be reachable from other machines (as the train server's
            ``--expose``); every request must then carry ``Authorization: Bearer <key>``.
        api_key: the key an exposed model requires: by default the train server's token
            (when served through one), else a fresh key per deployment
            (``handle.api_key``). Ignored on loopback unless given.
        port: its port; None picks a free one (``handle.url`` says which).
        num_replicas: processes holding the model; each holds ``resources_per_replica``.
        resources_per_replica: default ``{"CPU": 1}``.
        num_gpus: GPUs each replica holds (``0.5`` shares one; default 0). A replica with
            GPUs sees only its own (``CUDA_VISIBLE_DEVICES``) and a ``TorchModel``'s
            weights go to ``cuda`` there. Also ``model.serve(ref, num_gpus=1)``.
        ray_actor_options: Ray Serve's spelling, ``{"num_cpus": 1, "num_gpus": 1,
            "memory": bytes, "resources": {...}}``: the same per-replica resources.
        max_batch_size: the most inputs one ``predict`` call gets (dynamic batching).
        batch_wait_ms: how long a batch waits for more requests once the first arrived.
        max_request_bytes: larger request bodies are refused with 413.
        request_timeout_s: a request that no replica answered by then gets 503.
        max_queued_requests: more waiting requests than this are refused with 503.
        max_restarts: consecutive times a replica may die before it is ready before the
            served job fails (a replica that dies after it was ready is always restarted).
    """

    route_prefix: str | None = None
    host: str = "127.0.0.1"
    expose: bool = False
    api_key: str | None = None
    port: int | None = None
    num_replicas: int = 1
    resources_per_replica: Mapping[str, float] | None = None
    num_gpus: float = 0
    ray_actor_options: Mapping[str, Any] | None = None
    max_batch_size: int = 1
    batch_wait_ms: float = 0.0
    max_request_bytes: int = 10 * 2**20
    request_timeout_s: float = 30.0
    max_queued_requests: int = 100_000
    max_restarts: int = 3

    def __post_init__(self) -> None:
        def whole(name: str, low: int) -> None:
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < low:
                raise ConfigError(f"serve_settings {name}={v!r}: give a whole number >= {low}.")

        whole("num_replicas", 1)
        whole("max_batch_size", 1)
        whole("max_request_bytes", 1)
        whole("max_queued_requests", 1)
        whole("max_restarts", 0)
        if self.port is not None:
            p = self.port
            if isinstance(p, bool) or not isinstance(p, int) or not 0 <= p < 65536:
                raise ConfigError(f"serve_settings port={p!r}: give a TCP port 0-65535 (or "
                                  f"None for a free one).")
        for name in ("batch_wait_ms", "request_timeout_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"serve_settings {name}={v!r}: give a number >= 0.")
        g = self.num_gpus
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not g >= 0 \
                or (g > 1 and not float(g).is_integer()):
            raise ConfigError(f"serve_settings num_gpus={g!r}: give a number of GPUs per "
                              f"replica >= 0 (a fraction below 1 shares a GPU; above 1, a "
                              f"whole number).")
        opts = self.ray_actor_options
        if opts is not None:
            allowed = {"num_cpus", "num_gpus", "memory", "resources"}
            if not isinstance(opts, Mapping) or set(opts) - allowed:
                raise ConfigError(
                    f"serve_settings ray_actor_options={opts!r}: tandem takes the resource "
                    f"keys {sorted(allowed)} (each replica's share); other Ray actor options "
                    f"have no meaning here.")
        if self.request_timeout_s <= 0:
            raise ConfigError("serve_settings request_timeout_s must be > 0.")
        rp = self.route_prefix
        if rp is not None and (not isinstance(rp, str) or not rp.startswith("/")
                               or any(c in rp for c in " ?#")):
            raise ConfigError(f"serve_settings route_prefix={rp!r}: give a path starting with "
                              f"'/', e.g. '/digits'.")
        if not isinstance(self.host, str) or not self.host:
            raise ConfigError(f"serve_settings host={self.host!r}: give an address such as "
                              f"'127.0.0.1' (this machine only).")
        if not isinstance(self.expose, bool):
            raise ConfigError(f"serve_settings expose={self.expose!r}: give True or False.")
        if not is_loopback(self.host) and not self.expose:
            raise ConfigError(
                f"serve_settings host={self.host!r} lets other machines reach the model; "
                f"that needs expose=True (clients then send 'Authorization: Bearer <key>', "
                f"see handle.api_key). Leave host unset to serve on this machine only.")
        k = self.api_key
        if k is not None and (not isinstance(k, str) or len(k) < 16 or not k.isprintable()
                              or " " in k):
            raise ConfigError("serve_settings api_key must be a string of at least 16 "
                              "printable characters without spaces (e.g. "
                              "secrets.token_urlsafe(32)).")

    @classmethod
    def of(cls, value: ServeSettings | Mapping[str, Any] | None) -> ServeSettings:
        if value is None:
            return cls()
        if isinstance(value, ServeSettings):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"serve_settings must be a dict or ServeSettings, got {value!r}.")
        known = {f.name for f in fields(cls) if not f.name.startswith("_")}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ConfigError(f"serve_settings has unknown keys {unknown}; known: "
                              f"{sorted(known)}.")
        return cls(**dict(value))

    @property
    def needs_key(self) -> bool:
        """Requests must carry the key: the model is exposed, or a key was given."""
        return self.expose or self.api_key is not None

    def bundle(self) -> dict[str, float]:
        """One replica's resources: ``resources_per_replica`` (default ``{"CPU": 1}``), with
        ``num_gpus`` and ``ray_actor_options`` merged in (validated)."""
        from tandem.cluster.base import validate_bundle

        res = dict(self.resources_per_replica if self.resources_per_replica is not None
                   else {"CPU": 1})
        opts = dict(self.ray_actor_options or {})
        given = {"CPU": opts.get("num_cpus"), "GPU": opts.get("num_gpus"),
                 "memory": opts.get("memory")}
        extra = opts.get("resources") or {}
        if not isinstance(extra, Mapping):
            raise ConfigError(f"serve_settings ray_actor_options resources={extra!r}: give a "
                              f"dict of custom resources, e.g. {{'accel': 1}}.")
        given.update(extra)
        if self.num_gpus:
            if given["GPU"] is not None and given["GPU"] != self.num_gpus:
                raise ConfigError(
                    f"serve_settings num_gpus={self.num_gpus!r} and ray_actor_options "
                    f"num_gpus={given['GPU']!r} disagree; give one of them.")
            given["GPU"] = self.num_gpus
        for key, value in given.items():
            if value is None:
                continue
            if key in res and self.resources_per_replica is not None and res[key] != value:
                raise ConfigError(
                    f"serve_settings asks for {key}={value!r} per replica and "
                    f"resources_per_replica {key}={res[key]!r}; give it once.")
            res[key] = value
        return validate_bundle(res, "resources_per_replica")

    @property
    def gpus_per_replica(self) -> float:
        return float(self.bundle().get("GPU", 0.0))

    def prefix_for(self, name: str) -> str:
        rp = self.route_prefix if self.route_prefix is not None else "/" + name
        return rp.rstrip("/")


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
