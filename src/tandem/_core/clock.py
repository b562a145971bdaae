"""Clocks: the real one, and a simulated one for tests of time-dependent logic."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod


class Clock(ABC):
    """Source of time. Logic that depends on time takes a ``Clock`` so tests can fake it."""

    @abstractmethod
    def now(self) -> float:
        """Seconds since an arbitrary, fixed origin (monotonic)."""

    @abstractmethod
    def sleep(self, seconds: float) -> None:
        """Waits ``seconds``."""


class RealClock(Clock):
    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class SimulatedClock(Clock):
    """A clock that moves only when told to: ``sleep`` and ``advance`` move it instantly."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError(f"cannot move a clock backwards (got {seconds} s)")
        self._now += seconds
