"""GPU sampling: NVML figures per worker process (and the processes it started)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from tandem.server.usage import UsageSampler


class ScriptedNvml:
    """NVML with one device whose processes and utilisation a test sets."""

    def __init__(self, procs: list[tuple[int, int]], util: dict[int, int] | None,
                 device_util: int = 40) -> None:
        self.procs, self.util, self.device_util = procs, util, device_util

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, i: int) -> str:
        return f"dev{i}"

    def nvmlDeviceGetComputeRunningProcesses(self, h: str) -> list:
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.procs]

    def nvmlDeviceGetUtilizationRates(self, h: str) -> SimpleNamespace:
        return SimpleNamespace(gpu=self.device_util)

    def nvmlDeviceGetProcessUtilization(self, h: str, since: int) -> list:
        if self.util is None:
            raise RuntimeError("not supported")
        return [SimpleNamespace(pid=p, smUtil=u, timeStamp=1) for p, u in self.util.items()]


def _sample(nvml: ScriptedNvml, pid: int) -> list:
    s = UsageSampler(lambda: {"job": {0: pid}}, lambda _: None, 0, nvml=nvml)
    from tandem.server.usage import _Nvml

    s._nvml = _Nvml(nvml)
    s.sample()
    return s.sample()


def test_gpu_use_of_a_worker_and_its_child_process():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        me = os.getpid()
        [s] = _sample(ScriptedNvml([(child.pid, 3 << 30)], {child.pid: 77}), me)
        assert (s.gpu_util, s.gpu_mem_bytes) == (77.0, 3 << 30)
        # an older driver without per-process utilisation: the device's figure
        [s] = _sample(ScriptedNvml([(me, 1 << 30), (child.pid, 1 << 30)], None, 55), me)
        assert (s.gpu_util, s.gpu_mem_bytes) == (55.0, 2 << 30)
        [s] = _sample(ScriptedNvml([(12345678, 1)], {12345678: 9}), me)
        assert s.gpu_util is None and s.gpu_mem_bytes is None and s.rss_bytes > 0
    finally:
        child.kill()
        child.wait()


@pytest.mark.gpu
def test_real_gpu_is_sampled_where_there_is_one():
    torch = pytest.importorskip("torch")
    pytest.importorskip("pynvml")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU here")
    code = ("import torch, time\nx = torch.randn(4096, 4096, device='cuda')\n"
            "t = time.time()\nwhile time.time() - t < 20:\n    x = x @ x; x /= x.norm()\n"
            "    torch.cuda.synchronize()\n")
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        s = UsageSampler(lambda: {"job": {0: proc.pid}}, lambda _: None, 0)
        from tandem.server.usage import _Nvml

        s._nvml = _Nvml()
        deadline = time.monotonic() + 15
        best = None
        while time.monotonic() < deadline:
            got = s.sample()
            if got and got[0].gpu_mem_bytes and (got[0].gpu_util or 0) > 0:
                best = got[0]
                break
            time.sleep(0.5)
        assert best is not None, "NVML never saw the worker use the GPU"
        assert best.gpu_mem_bytes > 64 << 20
    finally:
        proc.kill()
        proc.wait()
