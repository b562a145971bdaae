"""`tandem server start --ray-address ADDR`: a train server whose jobs run on Ray."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

ray = pytest.importorskip("ray")
pytestmark = [pytest.mark.ray, pytest.mark.timeout(180), pytest.mark.ray_cluster]

CLIENT = textwrap.dedent('''
    import json, sys
    from tandem import train
    from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

    def where(config):
        import ray
        train.report({"node": ray.get_runtime_context().get_node_id(),
                      "rank": train.get_context().get_world_rank()})

    result = DataParallelTrainer(
        where, scaling_config=ScalingConfig(num_workers=4),  # 2 CPUs per node: both nodes
        run_config=RunConfig(storage_path=sys.argv[1], name="on_ray_via_server"),
    ).fit()
    print("RESULT " + json.dumps(result.metrics))
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(home: str, storage: str, *flags: str) -> tuple[subprocess.Popen, dict]:
    log = open(os.path.join(storage, "server.out"), "ab")  # noqa: SIM115 - the server's
    proc = subprocess.Popen(
        [sys.executable, "-m", "tandem.server", "--port", str(_free_port()),
         "--storage", storage, *flags],
        env={**os.environ, "HOME": home}, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    info_path = os.path.join(home, ".tandem", "server.json")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, open(os.path.join(storage, "server.out")).read()
        try:
            with open(info_path) as f:
                info = json.load(f)
            r = httpx.get(info["address"] + "/api/health",
                          headers={"Authorization": f"Bearer {info['token']}"}, timeout=2)
            if info["pid"] == proc.pid and r.status_code == 200:
                return proc, info
        except (OSError, ValueError, KeyError, httpx.HTTPError):
            pass
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the server did not start")


def _stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_server_runs_its_jobs_on_the_ray_cluster(ray_cluster, tmp_path):
    home, storage = tmp_path / "home", tmp_path / "server"
    home.mkdir()
    storage.mkdir()
    proc, info = _start(str(home), str(storage), "--ray-address", ray_cluster.cluster.address)
    try:
        with httpx.Client(base_url=info["address"],
                          headers={"Authorization": f"Bearer {info['token']}"}) as c:
            cluster = c.get("/api/cluster").json()
        assert cluster["resources"]["CPU"] == 4  # Ray's two nodes, not this machine
        out = subprocess.run(
            [sys.executable, "-c", CLIENT, str(tmp_path / "results")],
            env={**os.environ, "HOME": str(home), "TANDEM_ADDRESS": info["address"]},
            capture_output=True, text=True, timeout=120,
        )
        line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
        assert line, out.stdout[-2000:] + out.stderr[-3000:]
        assert json.loads(line[len("RESULT "):])["node"] in {
            n["NodeID"] for n in ray.nodes() if n["Alive"]}
    finally:
        _stop(proc)


def test_local_resource_flags_with_a_ray_address_are_refused(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tandem.server", "--storage", str(tmp_path),
         "--ray-address", "auto", "--num-cpus", "4"],
        env={**os.environ, "HOME": str(tmp_path)}, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "--num-cpus" in out.stderr and "ray start --num-cpus" in out.stderr
