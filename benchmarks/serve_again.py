"""Serving start-up, first and second deployment in one process (issue 25, item 2).

    python benchmarks/serve_again.py [--repeats 3] [--no-litserve] [--fresh]

Each repeat is a fresh process: it registers ``serve_bench.py``'s MLP from a separate
process (as ``tandem serve bench@1`` would), then ``model.serve("bench@1")`` -> first
answer, ``handle.stop()``, and the same again in the same process; it prints both times
with the load average (1 min) when each was taken. ``TANDEM_BENCH_BASELINE=DIR`` also runs
DIR/src's tandem, interleaved. ``tandem`` runs with no warm host (``TANDEM_WARM_HOST=0``);
``warmhost`` (``--no-warm-host`` skips it), interleaved, while a warm host runs
(``tandem warm start --preload torch``, docs/warm_workers.md) that served this program
once before, unmeasured. The peer, LitServe (if installed), runs in the same repeats:
``serve_bench.py``'s LitServe server, from ``LitServer(...)`` (after its imports, as
tandem's clock starts after ``from tandem import model``) to the first answer; LitServe
serves one API per process, so its "second" is a second server process. ``--fresh``:
the model is registered before the process starts and its first figure runs from before
``from tandem import model`` to the first answer (a program that serves at once, so
nothing overlaps the start of the process replicas fork from).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _first_answer(port: int, body: bytes, timeout_s: float = 120) -> float:
    import http.client

    deadline = time.monotonic() + timeout_s
    last = "no connection"
    while time.monotonic() < deadline:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("POST", "/bench/predict", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            text = r.read()
            c.close()
            if r.status == 200:
                return time.perf_counter()
            last = f"HTTP {r.status}: {text[:300]!r}"
        except OSError as e:
            last = f"{type(e).__name__}: {e}"
        time.sleep(0.005)
    raise RuntimeError(f"no answer within {timeout_s} s; the last try got {last}")


def child(weights: str, fresh: bool = False) -> None:
    """``fresh``: the model was registered before this process started, and the clock
    starts before ``from tandem import model`` (a program that serves at once); else the
    program registers it from another process between its import and ``serve``."""
    start = time.perf_counter()
    from tandem import model

    if not fresh:
        subprocess.run([sys.executable, os.path.join(HERE, "serve_bench.py"), "--_put",
                        "--weights", weights], check=True)
    body = json.dumps({"inputs": [[0.0] * 64]}).encode()
    out = []
    for i in range(2):
        port = _port()
        t0 = start if fresh and i == 0 else time.perf_counter()
        handle = model.serve("bench@1", serve_settings={
            "port": port, "resources_per_replica": {"CPU": 1}, "route_prefix": "/bench"})
        out.append(_first_answer(port, body) - t0)
        out.append(os.getloadavg()[0])
        handle.stop()
    print(json.dumps([out[0], out[2], out[1], out[3]]))


def child_now(weights: str) -> None:
    """A program that serves a model object right after its imports (no registry, no other
    work that would hide the zygote's start): ``model.serve(m)`` -> first answer."""
    import numpy as np
    import torch

    from tandem import model

    sys.path.insert(0, HERE)
    from serve_bench import build_net

    class NowMLP(model.TorchModel):
        example_input = np.zeros((1, 64), dtype=np.float32)

        def setup(self) -> None:
            self.net = build_net()

        def forward(self, x: Any) -> Any:
            return self.net(x)

    m = NowMLP()
    m.ensure_setup()
    m.net.load_state_dict(torch.load(weights))
    port = _port()
    body = json.dumps({"inputs": [[0.0] * 64]}).encode()
    t0 = time.perf_counter()
    handle = model.serve(m, serve_settings={
        "port": port, "resources_per_replica": {"CPU": 1}, "route_prefix": "/bench"})
    first = _first_answer(port, body) - t0
    load = os.getloadavg()[0]
    handle.stop()
    print(json.dumps([first, load]))


def litserve_once(weights: str, work: str) -> tuple[float, float]:
    """LitServe's server process, ``LitServer(...)`` -> first answer; and the load then."""
    from serve_bench import ROUTES, first_answer, stop_tree

    port = _port()
    t0_file = tempfile.mktemp(dir=work, suffix=".t0")  # noqa: S306 - the server writes it
    env = {**os.environ, "SERVE_BENCH_BATCH": "1", "SERVE_BENCH_WEIGHTS": weights}
    proc = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "serve_bench.py"), "--_server", "litserve",
         "--port", str(port), "--weights", weights, "--t0-file", t0_file],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        body = json.dumps({"inputs": [[0.0] * 64]}).encode()
        t1 = first_answer(port, ROUTES["litserve"], body, proc)
        load = os.getloadavg()[0]
        with open(t0_file) as f:
            return t1 - float(f.read()), load
    finally:
        stop_tree(proc)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-litserve", action="store_true", help="skip the LitServe peer")
    p.add_argument("--no-warm-host", action="store_true", help="skip the warm host's rows")
    p.add_argument("--fresh", action="store_true",
                   help="register first, then time a fresh process from its import of "
                        "tandem to the first answer (no other work in between)")
    p.add_argument("--_child", default=None)
    p.add_argument("--_child_now", default=None)
    a = p.parse_args()
    if a._child:
        child(a._child, fresh=a.fresh)
        return 0
    if a._child_now:
        child_now(a._child_now)
        return 0
    sys.path.insert(0, HERE)
    from serve_bench import train_weights

    work = tempfile.mkdtemp(prefix="serve-again-")
    weights = os.path.join(work, "w.pt")
    train_weights(weights)
    src = os.path.join(os.path.dirname(HERE), "src")
    variants = {"tandem": src}
    base = os.environ.get("TANDEM_BENCH_BASELINE")
    if base:
        variants["baseline"] = os.path.join(base, "src")
    warm_dir = None if a.no_warm_host else os.path.join(work, "warm")
    if warm_dir is not None:
        variants["warmhost"] = src
    import importlib.util

    peer = not a.no_litserve and importlib.util.find_spec("litserve") is not None
    got: dict[str, list[list[float]]] = {k: [] for k in variants}
    if peer:
        got["litserve"] = []

    def child_env(name: str, src: str) -> dict[str, str]:
        home = tempfile.mkdtemp(dir=work)
        env = {k: v for k, v in os.environ.items() if k != "TANDEM_ADDRESS"}
        env = {**env, "PYTHONPATH": src, "HOME": home, "TANDEM_HOME": os.path.join(home, ".tandem")}
        if name == "warmhost":
            env["TANDEM_WARM_DIR"] = warm_dir or ""
        else:
            env["TANDEM_WARM_HOST"] = "0"
        return env

    try:
        if warm_dir is not None:
            env = child_env("warmhost", src)
            subprocess.run([sys.executable, "-m", "tandem.cli", "warm", "start", "--preload",
                            "torch"], env=env, check=True, timeout=600, stdout=subprocess.DEVNULL)
            for mode in ("--_child", "--_child_now"):  # a first program teaches it: unmeasured
                subprocess.run([sys.executable, __file__, mode, weights], env=env,
                               capture_output=True, timeout=600)
        return _repeats(a, got, variants, weights, work, peer, child_env)
    finally:
        if warm_dir is not None:
            subprocess.run([sys.executable, "-m", "tandem.cli", "warm", "stop"],
                           env=child_env("warmhost", src), timeout=120,
                           stdout=subprocess.DEVNULL)


def _repeats(a: argparse.Namespace, got: dict[str, list[list[float]]], variants: dict[str, str],
             weights: str, work: str, peer: bool, child_env: Any) -> int:
    for _ in range(a.repeats):
        if peer:
            (f1, l1), (f2, l2) = litserve_once(weights, work), litserve_once(weights, work)
            got["litserve"].append([f1, f2, l1, l2])
            print(f"litserve: first {f1:.2f} s (load {l1:.1f}), second {f2:.2f} s "
                  f"(load {l2:.1f})", flush=True)
        for name, src in variants.items():
            env = child_env(name, src)
            if a.fresh:
                subprocess.run([sys.executable, os.path.join(HERE, "serve_bench.py"), "--_put",
                                "--weights", weights], env=env, check=True,
                               capture_output=True, timeout=600)
            proc = subprocess.run([sys.executable, __file__, "--_child", weights,
                                   *(["--fresh"] if a.fresh else [])], env=env,
                                  capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                print(f"{name}: this repeat failed (left out):\n{proc.stderr[-1500:]}",
                      file=sys.stderr, flush=True)
                continue
            times = json.loads(proc.stdout.strip().splitlines()[-1])
            got[name].append(times)
            print(f"{name}: first {times[0]:.2f} s (load {times[2]:.1f}), second "
                  f"{times[1]:.2f} s (load {times[3]:.1f})", flush=True)
            proc = subprocess.run([sys.executable, __file__, "--_child_now", weights],
                                  env=child_env(name, src), capture_output=True, text=True,
                                  timeout=600)
            if proc.returncode != 0:
                print(f"{name}: this repeat failed (left out):\n{proc.stderr[-1500:]}",
                      file=sys.stderr, flush=True)
                continue
            now = json.loads(proc.stdout.strip().splitlines()[-1])
            got.setdefault(name + " (serve right after imports)", []).append(
                [now[0], now[0], now[1], now[1]])
            print(f"{name}: serve right after imports, first {now[0]:.2f} s (load "
                  f"{now[1]:.1f})", flush=True)
    for name, runs in got.items():
        if not runs:
            continue
        first = statistics.median(r[0] for r in runs)
        second = statistics.median(r[1] for r in runs)
        load = statistics.median(x for r in runs for x in r[2:4])
        print(f"{name}: median first {first:.2f} s, second {second:.2f} s, median load "
              f"{load:.1f} (targets <= 1.0 s / <= 0.3 s)")  # "right after imports": first only
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
