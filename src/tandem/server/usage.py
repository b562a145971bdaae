"""Resource-use sampling of running workers: CPU %, RSS, and GPU use through NVML."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from tandem.jobs.store import UsageSample

logger = logging.getLogger(__name__)


class _Nvml:
    """GPU utilisation and per-process GPU memory, when NVML (pynvml) and a GPU exist."""

    def __init__(self) -> None:
        self.ok = False
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nv = pynvml
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                             for i in range(pynvml.nvmlDeviceGetCount())]
            self.ok = bool(self._handles)
        except Exception:  # noqa: BLE001 - no NVML or no GPU: CPU figures only
            self.ok = False

    def by_pid(self) -> dict[int, tuple[float, int]]:
        """``pid -> (GPU utilisation %, GPU memory bytes)`` for processes using a GPU."""
        out: dict[int, tuple[float, int]] = {}
        if not self.ok:
            return out
        nv = self._nv
        for h in self._handles:
            try:
                util = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
                procs = nv.nvmlDeviceGetComputeRunningProcesses(h)
            except Exception:  # noqa: BLE001
                continue
            for p in procs:
                used = int(getattr(p, "usedGpuMemory", 0) or 0)
                prev = out.get(p.pid, (0.0, 0))
                out[p.pid] = (max(prev[0], util), prev[1] + used)
        return out


class UsageSampler:
    """Every ``interval_s``, samples each running job's workers and hands the samples to
    ``sink`` (the store writer). ``jobs()`` returns ``{job_id: {rank: pid}}``."""

    def __init__(
        self,
        jobs: Callable[[], dict[str, dict[int, int]]],
        sink: Callable[[list[UsageSample]], None],
        interval_s: float,
    ) -> None:
        self._jobs = jobs
        self._sink = sink
        self.interval_s = interval_s
        self._procs: dict[int, psutil.Process] = {}
        self._stop = threading.Event()
        self.latest: dict[str, list[UsageSample]] = {}
        self._nvml: _Nvml | None = None
        self._thread: threading.Thread | None = None
        if interval_s > 0:
            self._thread = threading.Thread(target=self._run, name="tandem-usage", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        self._nvml = _Nvml()
        while not self._stop.wait(self.interval_s):
            try:
                samples = self.sample()
                if samples:
                    self._sink(samples)
            except Exception:
                logger.exception("resource sampling failed")

    def sample(self) -> list[UsageSample]:
        now = time.time()
        gpu = self._nvml.by_pid() if self._nvml is not None else {}
        out: list[UsageSample] = []
        alive: set[int] = set()
        latest: dict[str, list[UsageSample]] = {}
        for job_id, ranks in self._jobs().items():
            for rank, pid in ranks.items():
                proc = self._procs.get(pid)
                try:
                    if proc is None:
                        proc = self._procs[pid] = psutil.Process(pid)
                        proc.cpu_percent(None)  # the first call only starts the count
                    cpu = proc.cpu_percent(None)
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                alive.add(pid)
                g = gpu.get(pid)
                s = UsageSample(job_id, rank, now, cpu, rss,
                                g[0] if g else None, g[1] if g else None)
                out.append(s)
                latest.setdefault(job_id, []).append(s)
        for pid in list(self._procs):
            if pid not in alive:
                del self._procs[pid]
        self.latest = latest
        return out


def usage_dict(s: UsageSample) -> dict[str, Any]:
    return {"rank": s.rank, "time": s.time, "cpu_percent": s.cpu_percent,
            "rss_bytes": s.rss_bytes, "gpu_util": s.gpu_util, "gpu_mem_bytes": s.gpu_mem_bytes}
