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
    """GPU utilisation and GPU memory per process, when NVML (``nvidia-ml-py``) and a GPU
    exist. ``nvml`` is the module to use (tests pass a scripted one); by default
    ``pynvml``."""

    def __init__(self, nvml: Any = None) -> None:
        self.ok = False
        self._last_seen: dict[int, int] = {}
        try:
            if nvml is None:
                import pynvml as nvml  # type: ignore[no-redef]

            nvml.nvmlInit()
            self._nv = nvml
            self._handles = [nvml.nvmlDeviceGetHandleByIndex(i)
                             for i in range(nvml.nvmlDeviceGetCount())]
            self.ok = bool(self._handles)
        except Exception:  # noqa: BLE001 - no NVML or no GPU: CPU figures only
            self.ok = False

    def by_pid(self) -> dict[int, tuple[float, int]]:
        """``pid -> (GPU utilisation %, GPU memory bytes)`` for processes using a GPU.

        Utilisation is the process's own share of the SMs over the last interval
        (``nvmlDeviceGetProcessUtilization``) where the driver reports it, else the
        device's utilisation; memory is what the process holds, summed over devices.
        """
        out: dict[int, tuple[float, int]] = {}
        if not self.ok:
            return out
        nv = self._nv
        for i, h in enumerate(self._handles):
            try:
                procs = list(nv.nvmlDeviceGetComputeRunningProcesses(h))
            except Exception:  # noqa: BLE001, S112 - a device gone or not supported
                continue
            if not procs:
                continue
            try:
                device_util = float(nv.nvmlDeviceGetUtilizationRates(h).gpu)
            except Exception:  # noqa: BLE001
                device_util = 0.0
            per_proc: dict[int, float] = {}
            try:
                samples = nv.nvmlDeviceGetProcessUtilization(h, self._last_seen.get(i, 0))
                for smp in samples:
                    per_proc[int(smp.pid)] = max(per_proc.get(int(smp.pid), 0.0),
                                                 float(smp.smUtil))
                    self._last_seen[i] = max(self._last_seen.get(i, 0), int(smp.timeStamp))
            except Exception:  # noqa: BLE001, S110 - older drivers: device figure
                pass
            for p in procs:
                pid = int(p.pid)
                used = int(getattr(p, "usedGpuMemory", 0) or 0)
                util = per_proc.get(pid, device_util if not per_proc else 0.0)
                prev = out.get(pid, (0.0, 0))
                out[pid] = (max(prev[0], util), prev[1] + used)
        return out


class UsageSampler:
    """Every ``interval_s``, samples each running job's workers and hands the samples to
    ``sink`` (the store writer). ``jobs()`` returns ``{job_id: {rank: pid}}``."""

    def __init__(
        self,
        jobs: Callable[[], dict[str, dict[int, int]]],
        sink: Callable[[list[UsageSample]], None],
        interval_s: float,
        nvml: Any = None,
    ) -> None:
        self._nvml_module = nvml
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
        self._nvml = _Nvml(self._nvml_module)
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
                g = _gpu_of(proc, gpu)
                s = UsageSample(job_id, rank, now, cpu, rss,
                                g[0] if g else None, g[1] if g else None)
                out.append(s)
                latest.setdefault(job_id, []).append(s)
        for pid in list(self._procs):
            if pid not in alive:
                del self._procs[pid]
        self.latest = latest
        return out


def _gpu_of(proc: psutil.Process, gpu: dict[int, tuple[float, int]]) -> tuple[float, int] | None:
    """The GPU use of a worker and the processes it started (a CUDA context often lives
    in a child, e.g. a data loader or a launched script)."""
    if not gpu:
        return None
    pids = [proc.pid]
    try:
        pids += [c.pid for c in proc.children(recursive=True)]
    except psutil.Error:
        pass
    found = [gpu[p] for p in pids if p in gpu]
    if not found:
        return None
    return (max(f[0] for f in found), sum(f[1] for f in found))


def usage_dict(s: UsageSample) -> dict[str, object]:
    return {"rank": s.rank, "time": s.time, "cpu_percent": s.cpu_percent,
            "rss_bytes": s.rss_bytes, "gpu_util": s.gpu_util, "gpu_mem_bytes": s.gpu_mem_bytes}
