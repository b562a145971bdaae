"""Exposure is an explicit act: binding beyond loopback needs --expose and says where it
listens; TLS through --tls-cert/--tls-key, reached by a real client; no secret of the server
reaches a job's workers."""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import ssl
import subprocess
import sys

import httpx
import pytest

from tests.integration.server.conftest import free_port, run_client, start_server

pytestmark = pytest.mark.timeout(120)


def _self_signed(folder: str) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
            critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = os.path.join(folder, "cert.pem"), os.path.join(folder, "key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def _read_json(path: str) -> dict:
    with open(path) as f:
        return json.load(f)


def _server(home: str, storage: str, *extra: str, timeout: float = 30) -> subprocess.CompletedProcess:
    env = {**os.environ, "HOME": home}
    env.pop("TANDEM_ADDRESS", None)
    return subprocess.run([sys.executable, "-m", "tandem.server", "--port", str(free_port()),
                           "--storage", storage, *extra], env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)


def test_binding_beyond_loopback_needs_expose(home, tmp_path):
    out = _server(home, str(tmp_path / "s"), "--host", "0.0.0.0")
    assert out.returncode == 2
    assert "--host 0.0.0.0" in out.stderr and "--expose" in out.stderr
    assert not os.path.exists(os.path.join(home, ".tandem", "server.json"))
    out = _server(home, str(tmp_path / "s"), "--tls-cert", str(tmp_path / "nope.pem"))
    assert out.returncode == 2 and "--tls-key" in out.stderr


def test_exposed_server_says_where_it_really_listens(home, tmp_path):
    srv = start_server(home, str(tmp_path / "s"), None, "--host", "0.0.0.0", "--expose")
    try:
        log = srv.log_text()
        assert f"listening on 0.0.0.0:{srv.port} (every interface)" in log
        assert "NOT encrypted" in log
        info = _read_json(os.path.join(home, ".tandem", "server.json"))
        assert info["bound"] == f"0.0.0.0:{srv.port} (every interface)"
    finally:
        srv.stop()


CLIENT = """
import os
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

def loop():
    train.report({"env": dict(os.environ)})

result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(storage_path=os.environ["RUNS"], name="env")
                             ).fit()
print("OK", len(result.metrics["env"]))
"""


def test_a_client_reaches_the_server_over_https(home, tmp_path):
    cert, key = _self_signed(str(tmp_path))
    srv = start_server(home, str(tmp_path / "s"), None, "--tls-cert", cert, "--tls-key", key)
    try:
        assert srv.url.startswith("https://127.0.0.1:")
        assert "over HTTPS" in srv.log_text()
        out = run_client(srv, CLIENT, str(tmp_path), TANDEM_ADDRESS=srv.url,
                         SSL_CERT_FILE=cert, RUNS=str(tmp_path / "runs"))
        assert out.returncode == 0, out.stderr
        assert any(ln.startswith("OK") for ln in out.stdout.splitlines()), out.stdout
        with httpx.Client(verify=ssl.create_default_context(cafile=cert)) as c:
            r = c.get(f"{srv.url}/api/health", headers={"Authorization": f"Bearer {srv.token}"})
            assert r.status_code == 200 and r.json()["status"] == "ok"
        with pytest.raises(httpx.HTTPError):  # plain HTTP gets no answer
            httpx.get(f"http://127.0.0.1:{srv.port}/api/health", timeout=5)
    finally:
        srv.stop()


class _Daemon:
    def __init__(self, home: str, port: str) -> None:
        self.base = {**os.environ, "HOME": home}
        self.base.pop("TANDEM_ADDRESS", None)
        self.base.pop("TANDEM_TOKEN", None)
        self.port = port

    def env(self, **extra: str) -> dict[str, str]:
        return {**self.base, "TANDEM_ADDRESS": f"127.0.0.1:{self.port}", **extra}


ENV_JOB = """
import os, sys
from tandem import train
from tandem.train import DataParallelTrainer, RunConfig, ScalingConfig

def loop():
    train.report({"env": dict(os.environ), "rank": train.get_context().get_world_rank()})

result = DataParallelTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                             run_config=RunConfig(storage_path=sys.argv[1], name="env")).fit()
print(result.metrics["rank"])
"""


def test_no_server_secret_reaches_a_worker(home, tmp_path):
    """`tandem server start` hands the token to the daemon in its environment; the daemon
    must drop it before any worker is forked."""
    storage = str(tmp_path / "s")
    daemon = _Daemon(home, str(free_port()))
    started = subprocess.run([sys.executable, "-m", "tandem.cli", "server", "start", "--port",
                              daemon.port, "--storage", storage, "--num-cpus", "2"],
                             env=daemon.base, capture_output=True, text=True, check=False, timeout=90)
    assert started.returncode == 0, started.stderr
    try:
        info = _read_json(os.path.join(home, ".tandem", "server.json"))
        out = run_client(daemon, ENV_JOB, str(tmp_path), str(tmp_path / "runs"))
        assert out.returncode == 0, out.stderr
        assert out.stdout.split()[-1] == "0"
        with httpx.Client(base_url=info["address"],
                          headers={"Authorization": f"Bearer {info['token']}"}) as c:
            job = c.get("/api/jobs").json()["jobs"][0]
            rows = c.get(f"/api/jobs/{job['job_id']}/results").json()["results"]
        worker_env = rows[0]["metrics"]["env"]
        assert "TANDEM_SERVER_TOKEN" not in worker_env and "TANDEM_TOKEN" not in worker_env
        assert [k for k, v in worker_env.items() if info["token"] in v] == []
    finally:
        stopped = subprocess.run([sys.executable, "-m", "tandem.cli", "server", "stop"],
                                 env=daemon.base, capture_output=True, text=True, timeout=60,
                                 check=False)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
