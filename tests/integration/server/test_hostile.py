"""Hostile input to a real server: every one gets a 4xx naming what is wrong, nothing is
recorded for a refused job, and the server's resources and memory are untouched."""

from __future__ import annotations

import base64
import io
import os
import socket
import sys
import time
import zipfile

import cloudpickle
import psutil
import pytest

from tandem.jobs.spec import JobOutcome, JobRunner, JobSpec, JobStatus

pytestmark = pytest.mark.timeout(120)


class _Nothing(JobRunner):
    """A runner that does nothing (sent by value: the server does not import this module)."""

    def run(self, ctx):  # type: ignore[no-untyped-def]
        return JobOutcome(JobStatus.FINISHED)


cloudpickle.register_pickle_by_value(sys.modules[__name__])


def _payload(obj: object) -> str:
    return base64.b64encode(cloudpickle.dumps(obj)).decode()


def _spec(**kw: object) -> str:
    args: dict = {"name": "hostile", "bundles": ({"CPU": 1.0},), "runner": _Nothing()}
    args.update(kw)
    return _payload(JobSpec(**args))


def _count(c) -> int:
    return len(c.get("/api/jobs", params={"limit": 10000}).json()["jobs"])


def test_impossible_job_specs_are_refused_naming_the_field(server):
    with server.http() as c:
        before = _count(c)
        free = c.get("/api/cluster").json()["available"]
        cases = [
            ({"bundles": ({"CPU": -2.0},)}, ["body", "payload", "bundles", 0, "CPU"]),
            ({"bundles": ({"CPU": float("nan")},)}, ["body", "payload", "bundles", 0, "CPU"]),
            ({"bundles": ({"CPU": float("inf")},)}, ["body", "payload", "bundles", 0, "CPU"]),
            ({"bundles": ({"CPU": "2"},)}, ["body", "payload", "bundles", 0, "CPU"]),
            ({"bundles": ()}, ["body", "payload", "bundles"]),
            ({"bundles": ({"CPU": 1}, {"": 1})}, ["body", "payload", "bundles", 1]),
            ({"strategy": "ANYWHERE"}, ["body", "payload", "strategy"]),
            ({"name": "x" * 10_000}, ["body", "payload", "name"]),
        ]
        for kw, loc in cases:
            r = c.post("/api/jobs", json={"payload": _spec(**kw)})
            assert r.status_code == 422, (kw, r.text)
            detail = r.json()["detail"][0]
            assert detail["loc"] == loc, (kw, detail)
            assert "JobSpec" in detail["msg"] or "bundles" in detail["msg"] or "name" in detail["msg"]
        r = c.post("/api/jobs", json={"payload": _spec(strategy="ANYWHERE")})
        assert "PACK, SPREAD" in r.json()["detail"][0]["msg"]
        # nothing recorded (no FAILED record either), nothing held
        assert _count(c) == before
        assert c.get("/api/cluster").json()["available"] == free


def test_bad_environment_variables_are_refused(server):
    with server.http() as c:
        before = _count(c)
        for env in ({"A\x00B": "1"}, {"A=B": "1"}, {"": "1"}, {"1X": "1"}, {"OK": "a\x00b"},
                    {f"V{i}": "x" for i in range(1001)}, {"BIG": "x" * 40_000}):
            r = c.post("/api/jobs", json={"payload": _spec(),
                                          "runtime_env": {"env_vars": env}})
            assert r.status_code == 422, (list(env)[:2], r.text)
            detail = r.json()["detail"][0]
            assert detail["loc"][:3] == ["body", "runtime_env", "env_vars"], detail
            assert "environment variable" in detail["msg"]
        assert _count(c) == before


@pytest.mark.parametrize("text", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_json_numbers_get_4xx(server, text):
    with server.http() as c:
        for body in (f'{{"payload": "eA==", "priority": {text}}}',
                     f'{{"payload": {text}}}', f'{{"payload": "eA==", "tags": [{text}]}}',
                     f'{{"payload": "eA==", "runtime_env": {{"env_vars": {{"A": {text}}}}}}}'):
            r = c.post("/api/jobs", content=body.encode(),
                       headers={"Content-Type": "application/json"})
            assert r.status_code == 422, (body, r.status_code, r.text)
            assert r.json()["detail"]


def _raise_keyboard_interrupt() -> None:
    raise KeyboardInterrupt


def _exit_3() -> None:
    sys.exit(3)


class _ExitOnLoad:
    # not (sys.exit, (3,)): pickle finds a builtin by its name, and once W&B's service has
    # started in this test process (another test's), sys.exit is W&B's exit hook
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_exit_3, ())


class _InterruptOnLoad:
    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (_raise_keyboard_interrupt, ())


def test_payloads_that_raise_anything_while_loading_get_422(server):
    with server.http() as c:
        before = _count(c)
        for obj, name in ((_ExitOnLoad(), "SystemExit"),
                          (_InterruptOnLoad(), "KeyboardInterrupt")):
            r = c.post("/api/jobs", json={"payload": _payload(obj)})
            assert r.status_code == 422, r.text
            assert name in r.json()["detail"][0]["msg"]
        r = c.post("/api/jobs", json={"payload": base64.b64encode(b"\x80\x05garbage").decode()})
        assert r.status_code == 422
        assert c.get("/api/health").status_code == 200  # the server lives on
        assert _count(c) == before


def _zip(entries: list[tuple[str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()


def test_malformed_package_archives_get_422(server):
    cases = {
        "file and folder": _zip([("d", b"x"), ("d/x", b"y")]),
        "twice": _zip([("a.py", b"1"), ("a.py", b"2")]),
        "unsafe": _zip([("../evil.py", b"x")]),
        "not a zip": b"PK\x03\x04 not really",
        "truncated": _zip([("a.py", b"x" * 1000)])[:-30],
    }
    with server.http() as c:
        for i, (what, data) in enumerate(cases.items()):
            package_id = f"{i:032x}"
            r = c.put(f"/api/packages/{package_id}", content=data)
            assert r.status_code == 422, (what, r.status_code, r.text)
            assert "package" in str(r.json()["detail"]), what
        ok = c.put(f"/api/packages/{'f' * 32}", content=_zip([("d/x", b"y"), ("e.py", b"")]))
        assert ok.status_code == 200 and ok.json()["created"] is True
    assert [p for p in os.listdir(os.path.join(server.storage, "packages")) if ".tmp-" in p] == []


def _raw_request(server, head: bytes, chunks: int, chunk: bytes) -> bytes:
    """Sends a request by hand (chunked body); returns the raw answer."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
        s.sendall(head)
        try:
            if chunk:
                for _ in range(chunks):
                    s.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                s.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server answered and closed early: what we want
        out = b""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                got = s.recv(65536)
            except OSError:
                break
            if not got:
                break
            out += got
            head, sep, body = out.partition(b"\r\n\r\n")
            if sep:
                length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length:")]
                if length and len(body) >= length[0]:
                    break
        return out


def test_chunked_body_is_bounded_while_it_streams(server):
    proc = psutil.Process(server.proc.pid)
    rss = proc.memory_info().rss
    head = (f"POST /api/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {server.token}\r\n"
            f"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n").encode()
    chunk = b"a" * (1 << 20)
    answer = _raw_request(server, head, 200, chunk)  # 200 MiB offered, limit ~1.4 MiB
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"max-upload-mb" in answer
    assert proc.memory_info().rss - rss < 64 * 2**20  # never read into memory


def test_authentication_comes_before_size_checks(server):
    def declared(auth: str) -> bytes:
        head = (f"POST /api/jobs HTTP/1.1\r\nHost: x\r\n{auth}Content-Type: application/json"
                f"\r\nContent-Length: {10 * 2**30}\r\n\r\n").encode()
        return _raw_request(server, head, 0, b"")

    assert declared("").startswith(b"HTTP/1.1 401")
    assert declared("Authorization: Bearer nope\r\n").startswith(b"HTTP/1.1 401")
    assert declared(f"Authorization: Bearer {server.token}\r\n").startswith(b"HTTP/1.1 413")
    head = (b"POST /api/jobs HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    answer = _raw_request(server, head, 3, b"a" * (1 << 20))
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
