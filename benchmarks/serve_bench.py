"""Serving speed: tandem vs Ray Serve vs LitServe, the same model on the same machine.

    python benchmarks/serve_bench.py [--requests 400] [--seconds 8] [--systems tandem,ray,litserve]

A small MLP (64 -> 128 -> 10, trained for a moment on scikit-learn's digits) behind each
system, one replica holding one CPU (torch on one thread), each server in its own process
tree started by this script; closed-loop clients in this process. For each system:

* p50 / p99 latency of one client sending one input per request, no batching
  (target: tandem p50 <= 0.5x Ray Serve's);
* requests/s with 64 concurrent clients, dynamic batching on (max 32, wait 5 ms)
  (targets: >= 1.2x LitServe's, >= 3x Ray Serve's);
* time from the serve call (runtime start included: the first ``model.serve`` starts
  tandem's job service, Ray's includes ``ray.init``) to the first answer;
* PSS of the whole serving process tree (everything the server process started), measured
  right after the load. tandem's model is registered by a separate process first and served
  by reference (as `tandem serve bench@1` does), so its serving process never imports torch.

Each answer is checked against the model's local prediction.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HIDDEN = 128


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def build_net() -> Any:
    import torch

    return torch.nn.Sequential(torch.nn.Linear(64, HIDDEN), torch.nn.ReLU(),
                               torch.nn.Linear(HIDDEN, 10))


def train_weights(path: str) -> tuple[list[list[float]], list[list[float]]]:
    """A briefly trained MLP's state_dict at ``path``; returns inputs and expected outputs."""
    import torch
    from sklearn.datasets import load_digits

    torch.manual_seed(0)
    X, y = load_digits(return_X_y=True)
    Xt = torch.tensor(X / 16.0, dtype=torch.float32)
    yt = torch.tensor(y)
    net = build_net()
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(30):
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(Xt), yt).backward()
        opt.step()
    torch.save(net.state_dict(), path)
    with torch.no_grad():
        out = net(Xt[:256])
    return Xt[:256].tolist(), out.tolist()


# --------------------------------------------------------------------------- servers
# Each runs in its own process: `serve_bench.py --_server SYSTEM ...`.


def _write_t0(path: str) -> None:
    with open(path, "w") as f:
        f.write(repr(time.time()))


def _wait_for_signal() -> None:
    stop = {"now": False}

    def handler(*_: Any) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
    while not stop["now"]:
        time.sleep(0.1)


def server_tandem(a: argparse.Namespace) -> None:
    """Registers the model from a separate process, then serves it by reference, as
    `tandem serve bench@1` would: the serving process itself never imports torch."""
    from tandem import model

    subprocess.run([sys.executable, os.path.abspath(__file__), "--_put", "--weights",
                    a.weights], check=True)
    _write_t0(a.t0_file)
    handle = model.serve("bench@1", serve_settings={
        "port": a.port, "max_batch_size": a.batch, "batch_wait_ms": a.wait_ms,
        "resources_per_replica": {"CPU": 1}, "route_prefix": "/bench"})
    _wait_for_signal()
    handle.stop()


def put_tandem(weights: str) -> None:
    import numpy as np
    import torch

    from tandem import model

    class BenchMLP(model.TorchModel):
        example_input = np.zeros((1, 64), dtype=np.float32)

        def setup(self) -> None:
            self.net = build_net()

        def forward(self, x: Any) -> Any:
            return self.net(x)

    m = BenchMLP()
    m.ensure_setup()
    m.net.load_state_dict(torch.load(weights))
    model.put(m, name="bench")


def server_ray(a: argparse.Namespace) -> None:
    import ray
    import torch
    from ray import serve

    _write_t0(a.t0_file)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    serve.start(http_options={"host": "127.0.0.1", "port": a.port})
    batch, wait_s, weights = a.batch, a.wait_ms / 1000.0, a.weights

    @serve.deployment(num_replicas=1, ray_actor_options={"num_cpus": 1},
                      max_ongoing_requests=256)
    class BenchMLP:
        def __init__(self) -> None:
            torch.set_num_threads(1)
            self.net = build_net()
            self.net.load_state_dict(torch.load(weights))
            self.net.eval()

        @serve.batch(max_batch_size=max(batch, 1), batch_wait_timeout_s=wait_s)
        async def batched(self, xs: list[list[float]]) -> list[list[float]]:
            with torch.no_grad():
                return self.net(torch.tensor(xs, dtype=torch.float32)).tolist()

        async def __call__(self, request: Any) -> dict:
            body = await request.json()
            if batch > 1:
                return {"outputs": [await self.batched(body["inputs"][0])]}
            with torch.no_grad():
                out = self.net(torch.tensor(body["inputs"], dtype=torch.float32)).tolist()
            return {"outputs": out}

    serve.run(BenchMLP.bind(), route_prefix="/bench", name="bench")
    _wait_for_signal()
    serve.shutdown()
    ray.shutdown()


def _lit_api_class() -> Any:
    """LitServe pickles its API into a spawned worker: the class must live at module level."""
    try:
        import litserve as ls
    except ImportError:
        return None

    class LitBenchAPI(ls.LitAPI):
        def setup(self, device: Any) -> None:
            import torch

            torch.set_num_threads(1)
            self.batching = int(os.environ["SERVE_BENCH_BATCH"]) > 1
            self.net = build_net()
            self.net.load_state_dict(torch.load(os.environ["SERVE_BENCH_WEIGHTS"]))
            self.net.eval()

        def decode_request(self, request: Any) -> Any:
            return request["inputs"][0]

        def batch(self, inputs: list) -> Any:
            import torch

            return torch.tensor(inputs, dtype=torch.float32)

        def predict(self, x: Any) -> Any:
            import torch

            with torch.no_grad():
                if self.batching:
                    return self.net(x)
                return self.net(torch.tensor([x], dtype=torch.float32))[0]

        def unbatch(self, output: Any) -> list:
            return list(output)

        def encode_response(self, output: Any) -> dict:
            return {"outputs": [output.tolist()]}

    LitBenchAPI.__qualname__ = "LitBenchAPI"
    # LitServe reads the request type from this annotation; none means "the JSON body"
    LitBenchAPI.decode_request.__annotations__ = {}
    return LitBenchAPI


LitBenchAPI = _lit_api_class() if os.environ.get("SERVE_BENCH_BATCH") else None


def server_litserve(a: argparse.Namespace) -> None:
    import litserve as ls

    assert LitBenchAPI is not None
    if a.batch > 1:
        api = LitBenchAPI(max_batch_size=a.batch, batch_timeout=a.wait_ms / 1000.0)
    else:
        api = LitBenchAPI()
    server = ls.LitServer(api, accelerator="cpu", workers_per_device=1, timeout=60)
    _write_t0(a.t0_file)
    server.run(port=a.port, host="127.0.0.1", log_level="warning", generate_client_file=False)


ROUTES = {"tandem": "/bench/predict", "ray": "/bench", "litserve": "/predict"}
SERVERS = {"tandem": server_tandem, "ray": server_ray, "litserve": server_litserve}


# --------------------------------------------------------------------------- clients


def first_answer(port: int, path: str, body: bytes, proc: subprocess.Popen,
                 timeout_s: float = 300) -> float:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}")
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            c.request("POST", path, body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            c.close()
            if r.status == 200:
                return time.time()
        except OSError:
            pass
        time.sleep(0.005)
    raise RuntimeError("no answer")


def latency(port: int, path: str, X: list, expected: list, n: int) -> list[float]:
    import numpy as np

    c = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times = []
    for i in range(n + 50):
        body = json.dumps({"inputs": [X[i % len(X)]]}).encode()
        t = time.perf_counter()
        c.request("POST", path, body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        dt = time.perf_counter() - t
        assert r.status == 200, data
        out = json.loads(data)["outputs"][0]
        assert np.allclose(out, expected[i % len(X)], atol=1e-4), "a wrong answer"
        if i >= 50:
            times.append(dt)
    c.close()
    return times


async def _throughput(port: int, path: str, X: list, expected: list, clients: int,
                      seconds: float) -> tuple[float, int]:
    import aiohttp
    import numpy as np

    url = f"http://127.0.0.1:{port}{path}"
    bodies = [json.dumps({"inputs": [x]}) for x in X]
    counts = {"ok": 0, "err": 0}
    state = {"measuring": False, "stop": False}

    async def client(k: int, session: aiohttp.ClientSession) -> None:
        i = k
        while not state["stop"]:
            async with session.post(url, data=bodies[i % len(X)],
                                    headers={"Content-Type": "application/json"}) as r:
                data = await r.read()
            if r.status == 200:
                if state["measuring"]:
                    counts["ok"] += 1
                if i % 97 == 0:
                    out = json.loads(data)["outputs"][0]
                    assert np.allclose(out, expected[i % len(X)], atol=1e-4), "wrong answer"
            elif state["measuring"]:
                counts["err"] += 1
            i += clients

    conn = aiohttp.TCPConnector(limit=clients, force_close=False)
    async with aiohttp.ClientSession(connector=conn) as session:
        tasks = [asyncio.create_task(client(k, session)) for k in range(clients)]
        await asyncio.sleep(2.0)  # warm up
        state["measuring"] = True
        t = time.perf_counter()
        await asyncio.sleep(seconds)
        n = counts["ok"]
        elapsed = time.perf_counter() - t
        state["stop"] = True
        await asyncio.gather(*tasks, return_exceptions=True)
    return n / elapsed, counts["err"]


def tree_pss(pid: int) -> float:
    import psutil

    total = 0
    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0.0
    for p in procs:
        try:
            total += p.memory_full_info().pss
        except psutil.Error:
            pass
    return total / 2**20


def stop_tree(proc: subprocess.Popen) -> None:
    import psutil

    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.Error:
        kids = []
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 15
    for k in kids:
        try:
            k.wait(max(0.1, deadline - time.monotonic()))
        except psutil.TimeoutExpired:
            k.kill()
        except psutil.Error:
            pass


def run_system(system: str, mode: str, args: argparse.Namespace, weights: str,
               X: list, expected: list, tmp: str) -> dict[str, Any]:
    port = free_port()
    t0_file = os.path.join(tmp, f"{system}-{mode}.t0")
    batch, wait_ms = (1, 0.0) if mode == "latency" else (32, 5.0)
    env = {**os.environ, "HOME": os.path.join(tmp, "home"),
           "TANDEM_MODELS_PATH": os.path.join(tmp, f"models-{system}-{mode}"),
           "SERVE_BENCH_BATCH": str(batch), "SERVE_BENCH_WEIGHTS": weights}
    cmd = [sys.executable, os.path.abspath(__file__), "--_server", system, "--port", str(port),
           "--weights", weights, "--t0-file", t0_file, "--batch", str(batch),
           "--wait-ms", str(wait_ms)]
    log = open(os.path.join(tmp, f"{system}-{mode}.log"), "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    out: dict[str, Any] = {}
    try:
        body = json.dumps({"inputs": [X[0]]}).encode()
        t1 = first_answer(port, ROUTES[system], body, proc)
        with open(t0_file) as f:
            out["first_answer_s"] = t1 - float(f.read())
        if mode == "latency":
            times = latency(port, ROUTES[system], X, expected, args.requests)
            out["p50_ms"] = statistics.median(times) * 1000
            out["p99_ms"] = pct(times, 99) * 1000
        else:
            rps, errors = asyncio.run(_throughput(port, ROUTES[system], X, expected, 64,
                                                  args.seconds))
            out["rps"] = rps
            out["errors"] = errors
            out["pss_mb"] = tree_pss(proc.pid)
    except Exception as e:  # noqa: BLE001 - a system that fails is reported, not fatal
        log.flush()
        with open(log.name) as f:
            out["error"] = f"{type(e).__name__}: {e}; log: {f.read()[-2000:]}"
    finally:
        stop_tree(proc)
        log.close()
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--requests", type=int, default=400, help="latency requests per system")
    p.add_argument("--seconds", type=float, default=8.0, help="throughput window per system")
    p.add_argument("--systems", default="tandem,ray,litserve")
    p.add_argument("--json", default=None, help="also write the figures to this file")
    p.add_argument("--_server", default=None, help=argparse.SUPPRESS)
    p.add_argument("--_put", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--weights", default=None, help=argparse.SUPPRESS)
    p.add_argument("--t0-file", default=None, help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--wait-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._put:
        put_tandem(a.weights)
        return
    if a._server:
        SERVERS[a._server](a)
        return
    systems = [s.strip() for s in a.systems.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="serve-bench-") as tmp:
        os.makedirs(os.path.join(tmp, "home"))
        weights = os.path.join(tmp, "mlp.pt")
        X, expected = train_weights(weights)
        results: dict[str, dict[str, Any]] = {}
        for system in systems:
            results[system] = {}
            for mode in ("latency", "throughput"):
                r = run_system(system, mode, a, weights, X, expected, tmp)
                print(f"{system:9s} {mode:10s} {r}", flush=True)
                results[system].update({f"{mode}_{k}" if k in ("first_answer_s", "error")
                                        else k: v for k, v in r.items()})
    print()
    print(f"{'system':10s} {'p50 ms':>8s} {'p99 ms':>8s} {'req/s@64':>9s} "
          f"{'first answer s':>15s} {'PSS MB':>8s}")
    for system, r in results.items():
        def f(key: str, fmt: str, r: dict = r) -> str:
            v = r.get(key)
            return format(v, fmt) if isinstance(v, (int, float)) else "-"

        print(f"{system:10s} {f('p50_ms', '8.2f')} {f('p99_ms', '8.2f')} {f('rps', '9.0f')} "
              f"{f('latency_first_answer_s', '15.2f')} {f('pss_mb', '8.0f')}")
    t, ray, lit = (results.get(s, {}) for s in ("tandem", "ray", "litserve"))
    if t.get("p50_ms") and ray.get("p50_ms"):
        print(f"\np50 tandem / Ray Serve: {t['p50_ms'] / ray['p50_ms']:.2f}x (target <= 0.5x)")
    if t.get("rps") and lit.get("rps"):
        print(f"req/s tandem / LitServe: {t['rps'] / lit['rps']:.2f}x (target >= 1.2x)")
    if t.get("rps") and ray.get("rps"):
        print(f"req/s tandem / Ray Serve: {t['rps'] / ray['rps']:.2f}x (target >= 3x)")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
