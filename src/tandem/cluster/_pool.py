"""How many warm workers a ``LocalCluster`` keeps ready: the policy, apart from the processes.

A *warm worker* is a process forked from the zygote ahead of demand, with the zygote's
imports (the heavy modules jobs asked for, e.g. torch), already connected to the driver and
authenticated, waiting for a job. A gang that starts takes warm workers instead of forking
and connecting its own, so fork, connect and the HMAC handshake happen off the critical
path. Each warm worker runs one task and exits, so every task starts from the zygote's
clean state: no module, global, thread, environment variable or working directory of an
earlier task survives, and memory cannot grow from task to task.

The pool follows demand: it keeps as many warm workers as were asked for recently (the
largest gang, or the workers asked for within ``burst_window_s``, whichever is more),
never more than ``WarmPoolConfig.max_workers``, and lets a warm worker go once it waited
``idle_s`` without a job, so an idle cluster holds no warm workers.
"""

from __future__ import annotations

import collections
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from tandem._core.errors import ConfigError

#: The default bound of the pool's memory (MiB of PSS), and the variable that changes it
#: (for a train server: ``TANDEM_WARM_POOL_MB=800 tandem server start``).
DEFAULT_MAX_PSS_MB = 500.0
MAX_PSS_ENV = "TANDEM_WARM_POOL_MB"


@dataclass(frozen=True)
class WarmPoolConfig:
    """Bounds of the warm-worker pool of a ``LocalCluster``.

    Args:
        max_workers: most warm workers kept ready at once; 0 turns the pool off (every
            worker is forked when its gang starts).
        idle_s: a warm worker that waited this long without a job exits.
        burst_window_s: starts within this window count together as one burst of demand.
        max_pss_mb: most memory (MiB of PSS: shared pages split among the processes that
            share them) the zygote and the idle warm workers hold together. Past it the
            zygote learns no more imports and idle warm workers exit, newest last, until the
            pool is back under it (default 500, or ``$TANDEM_WARM_POOL_MB``).
    """

    max_workers: int = 4
    idle_s: float = 30.0
    burst_window_s: float = 1.0
    max_pss_mb: float = -1.0  # -1: $TANDEM_WARM_POOL_MB, else DEFAULT_MAX_PSS_MB

    def __post_init__(self) -> None:
        if self.max_pss_mb == -1.0:
            raw = os.environ.get(MAX_PSS_ENV, "").strip()
            try:
                value = float(raw) if raw else DEFAULT_MAX_PSS_MB
            except ValueError:
                raise ConfigError(f"{MAX_PSS_ENV}={raw!r}: give a number of MiB > 0 "
                                  f"(default {DEFAULT_MAX_PSS_MB:g}).") from None
            object.__setattr__(self, "max_pss_mb", value)
        if isinstance(self.max_workers, bool) or not isinstance(self.max_workers, int) \
                or self.max_workers < 0:
            raise ConfigError(
                f"WarmPoolConfig(max_workers={self.max_workers!r}): give a whole number >= 0 "
                f"(0 turns warm workers off)."
            )
        if isinstance(self.max_pss_mb, bool) or not isinstance(self.max_pss_mb, (int, float)) \
                or not self.max_pss_mb > 0:
            raise ConfigError(f"WarmPoolConfig(max_pss_mb={self.max_pss_mb!r}) (or "
                              f"{MAX_PSS_ENV}): give a number of MiB > 0 (default "
                              f"{DEFAULT_MAX_PSS_MB:g}).")
        for name in ("idle_s", "burst_window_s"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"WarmPoolConfig({name}={value!r}): give a number of "
                                  f"seconds > 0.")


class WarmPoolPolicy:
    """Decides the pool's size from the starts it is told about. Not thread-safe: the
    cluster calls it under its own lock.

    Each call costs O(1) amortized, however many starts the last ``idle_s`` saw (a sweep of
    trivial trials starts hundreds a second): the largest recent gang is kept in a deque
    whose sizes decrease from the front (a smaller start before a larger one can never be
    the largest again), the starts of the burst window in a second deque with their sum."""

    def __init__(self, config: WarmPoolConfig, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        # (time, size) within idle_s, sizes strictly decreasing from the front
        self._largest: collections.deque[tuple[float, int]] = collections.deque()
        # (time, size) within burst_window_s, and their summed sizes
        self._burst: collections.deque[tuple[float, int]] = collections.deque()
        self._burst_sum = 0

    def on_start(self, num_workers: int) -> None:
        """A gang of ``num_workers`` is starting now."""
        now = self._clock()
        largest = self._largest
        while largest and largest[-1][1] <= num_workers:
            largest.pop()
        largest.append((now, num_workers))
        self._burst.append((now, num_workers))
        self._burst_sum += num_workers

    def target(self) -> int:
        """How many warm workers to keep ready now."""
        now = self._clock()
        cfg = self.config
        largest, burst = self._largest, self._burst
        while largest and largest[0][0] < now - cfg.idle_s:
            largest.popleft()
        while burst and burst[0][0] < now - min(cfg.burst_window_s, cfg.idle_s):
            self._burst_sum -= burst.popleft()[1]
        if not largest or cfg.max_workers == 0:
            return 0
        return min(cfg.max_workers, max(largest[0][1], self._burst_sum))

    def expired(self, idle_since: float) -> bool:
        """Whether a warm worker idle since ``idle_since`` (this policy's clock) should go."""
        return self._clock() - idle_since >= self.config.idle_s

    def now(self) -> float:
        return self._clock()
