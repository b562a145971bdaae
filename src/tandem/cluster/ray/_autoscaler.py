"""What Ray's autoscaler is asked for: the gangs of the jobs waiting for room.

A pending job holds no placement group, so Ray cannot see it waiting; the cluster tells
the autoscaler (``ray.autoscaler.sdk.request_resources``) what the waiting gangs need.
A job asks again at every scheduling round while it waits; one that stopped asking
(placed, cancelled) is dropped after ``TTL_S``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Hashable

logger = logging.getLogger(__name__)


class AutoscalerDemand:
    """The demand of waiting gangs, by key (the job's bundle tuple), and what was sent.
    Thread-safe."""

    TTL_S = 5.0

    def __init__(self, poll_interval_s: float) -> None:
        self.poll_interval_s = poll_interval_s
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._demand: dict[Hashable, tuple[float, list[dict[str, float]]]] = {}
        self._sent: list[dict[str, float]] = []
        self._thread: threading.Thread | None = None

    def want(self, key: Hashable, ray_bundles: list[dict[str, float]]) -> None:
        """A gang (``key``) did not fit: ask for its bundles."""
        with self._lock:
            self._demand[key] = (time.monotonic(), ray_bundles)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._expire, name="tandem-ray-demand", daemon=True)
                self._thread.start()
        self.send()

    def placed(self, key: Hashable) -> None:
        """The gang was placed: stop asking for it."""
        with self._lock:
            if self._demand.pop(key, None) is None:
                return
        self.send()

    def withdraw_all(self) -> None:
        """Asks the autoscaler for nothing any more (shutdown)."""
        with self._lock:
            self._demand.clear()
        self.send()

    @property
    def sent(self) -> list[dict[str, float]]:
        """What the autoscaler was last asked for."""
        return list(self._sent)

    def send(self) -> None:
        """Sends the current demand to Ray if it changed since last sent."""
        with self._send_lock:  # one request at a time: the last one sent is the latest
            with self._lock:
                cutoff = time.monotonic() - max(self.TTL_S, 4 * self.poll_interval_s)
                for key in [k for k, (t, _) in self._demand.items() if t < cutoff]:
                    del self._demand[key]
                wanted = [b for _, bs in self._demand.values() for b in bs]
                if wanted == self._sent:
                    return
                self._sent = wanted
            try:
                from ray.autoscaler.sdk import request_resources

                request_resources(bundles=wanted)
            except Exception as e:  # noqa: BLE001 - a hint to the autoscaler, never fatal
                logger.warning("could not ask Ray's autoscaler for %s: %s", wanted, e)

    def _expire(self) -> None:
        while True:
            time.sleep(1.0)
            self.send()
            with self._lock:
                if not self._demand and not self._sent:
                    self._thread = None
                    return
