"""A 2-worker torch gang's start-up on a loaded machine (issue 25's last row: "never fails
for slowness").

    python benchmarks/gloo_under_load.py [--runs 20] [--burners 12]

Starts ``--burners`` busy loops (each a Python process spinning on one core), then runs
``--runs`` fresh programs one after another, each a 2-worker ``TorchTrainer.fit()`` whose
ranks join a gloo process group and ``all_reduce`` once, with no warm host. It prints each
program's ``fit()`` time, how many failed and how many needed the gang to join again (the
retry of docs/security.md, "Gang start-up on a loaded machine"), and the load average; it
exits 1 if any failed. The busy loops end with the script.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

PROGRAM = """
import sys, time
from tandem.train import RunConfig, ScalingConfig
from tandem.train.torch import TorchTrainer

def loop(config):
    import torch, torch.distributed as dist
    from tandem import train
    t = torch.ones(1)
    dist.all_reduce(t)
    train.report({"sum": float(t.item())})

t0 = time.perf_counter()
r = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                 run_config=RunConfig(storage_path=sys.argv[1], name="g")).fit()
assert r.error is None and r.metrics["sum"] == 2.0, (r.error, r.metrics)
print(f"fit {time.perf_counter() - t0:.2f} s")
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--burners", type=int, default=12)
    a = ap.parse_args()
    burners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
               for _ in range(a.burners)]
    failed = retried = 0
    try:
        time.sleep(2)
        print(f"load average before: {os.getloadavg()[0]:.1f}, {a.burners} busy loops")
        for i in range(a.runs):
            with tempfile.TemporaryDirectory() as d:
                env = {**os.environ, "TANDEM_WARM_HOST": "0"}
                p = subprocess.run([sys.executable, "-c", PROGRAM, d], env=env,
                                   capture_output=True, text=True, timeout=600)
                out = p.stdout + p.stderr
                again = "joining the torch process group failed" in out
                retried += again
                if p.returncode != 0:
                    failed += 1
                    print(f"run {i}: FAILED (exit {p.returncode})\n{out[-2000:]}")
                else:
                    last = p.stdout.strip().splitlines()[-1]
                    print(f"run {i}: {last}{' (joined again)' if again else ''}, "
                          f"load {os.getloadavg()[0]:.1f}")
    finally:
        for b in burners:
            b.kill()
        for b in burners:
            b.wait()
    print(f"{a.runs - failed} of {a.runs} started and ran; {failed} failed; "
          f"{retried} joined again after a failed attempt")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
