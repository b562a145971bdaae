"""The client side: addresses and tokens, working_dir packages, the event-stream parser."""

from __future__ import annotations

import io
import json
import os
import zipfile

import pytest

import tandem
from tandem._core.errors import ConfigError
from tandem.jobs import client, runtime
from tandem.jobs.client import (
    normalize_address,
    package_working_dir,
    parse_sse,
    resolve_connection,
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("TANDEM_ADDRESS", raising=False)
    monkeypatch.delenv("TANDEM_TOKEN", raising=False)
    return tmp_path / "home"


def write_server_file(home, address, token):
    (home / ".tandem").mkdir(parents=True)
    (home / ".tandem" / "server.json").write_text(json.dumps({"address": address, "token": token}))


@pytest.mark.parametrize("given,url", [
    ("127.0.0.1:8267", "http://127.0.0.1:8267"),
    ("http://box:9000/", "http://box:9000"),
    ("box", "http://box:8267"),
    ("https://a.example:443", "https://a.example:443"),
])
def test_addresses_are_normalised(given, url):
    assert normalize_address(given) == url


@pytest.mark.parametrize("bad", ["", "ftp://x:1", "http://:80", "host:notaport"])
def test_bad_addresses_say_what_to_give(bad):
    with pytest.raises(ConfigError, match="host:port|port"):
        normalize_address(bad)


def test_token_comes_from_the_local_server_file_for_that_server_only(home, monkeypatch):
    write_server_file(home, "http://127.0.0.1:8300", "secret")
    assert resolve_connection("localhost:8300") == ("http://localhost:8300", "secret")
    assert resolve_connection("auto") == ("http://127.0.0.1:8300", "secret")
    assert resolve_connection("127.0.0.1:8301") == ("http://127.0.0.1:8301", None)
    monkeypatch.setenv("TANDEM_TOKEN", "from-env")
    assert resolve_connection("127.0.0.1:8300")[1] == "from-env"
    assert resolve_connection("127.0.0.1:8300", token="given")[1] == "given"


def test_no_address_and_no_local_server(home):
    with pytest.raises(ConfigError, match="tandem server start"):
        resolve_connection()


def test_get_service_is_remote_with_tandem_address(home, monkeypatch):
    monkeypatch.setenv("TANDEM_ADDRESS", "127.0.0.1:1")
    try:
        service = runtime.get_service()
        assert isinstance(service, client.RemoteJobService)
        assert service.address == "http://127.0.0.1:1"
        with pytest.raises(client.ServerUnavailableError,
                           match=r"cannot reach the tandem server at http://127.0.0.1:1 \(connection refused\)"):
            service.health()
    finally:
        tandem.shutdown()
    assert runtime.current_service() is None


def test_init_with_address_refuses_local_resources_and_checks_the_server(home):
    with pytest.raises(ConfigError, match="num_cpus"):
        tandem.init(address="127.0.0.1:1", num_cpus=2)
    with pytest.raises(client.ServerUnavailableError, match="127.0.0.1:1"):
        tandem.init(address="127.0.0.1:1")
    assert not tandem.is_initialized()
    with pytest.raises(ConfigError, match="runtime_env"):
        tandem.init(runtime_env={"working_dir": "."})


def test_runtime_env_is_checked():
    with pytest.raises(ConfigError, match=r"installs nothing per job.*pip.*install the packages"):
        client.check_runtime_env({"pip": ["x"]})
    with pytest.raises(ConfigError, match=r"unknown key.*'wokring_dir'.*allowed"):
        client.check_runtime_env({"wokring_dir": "."})
    with pytest.raises(ConfigError, match=r"excludes.*list of gitignore patterns.*'data/'"):
        client.check_runtime_env({"excludes": "data/"})
    assert client.check_runtime_env({"working_dir": "/w", "excludes": ["data/"]}) == {
        "env_vars": {}, "working_dir": "/w", "excludes": ["data/"]}
    with pytest.raises(ConfigError, match="env_vars"):
        client.check_runtime_env({"env_vars": {"A": 1}})
    assert client.check_runtime_env({"env_vars": {"A": "1"}}) == {"env_vars": {"A": "1"}}


def test_package_honours_gitignore_and_limit(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "model.py").write_text("X = 1\n")
    (tmp_path / "src" / "model.pyc").write_text("junk")
    (tmp_path / "src" / ".gitignore").write_text("local_*.txt\n!local_keep.txt\n")
    (tmp_path / "src" / "local_a.txt").write_text("a")
    (tmp_path / "src" / "local_keep.txt").write_text("k")
    (tmp_path / "outputs").mkdir()
    (tmp_path / "outputs" / "big.bin").write_bytes(b"x" * 5000)
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_text("x")
    (tmp_path / "notes.log").write_text("log")
    (tmp_path / ".gitignore").write_text("# comment\n/outputs/\n*.log\n")
    pkg_id, data = package_working_dir(str(tmp_path))
    names = sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())
    assert names == [".gitignore", "src/.gitignore", "src/local_keep.txt", "src/model.py"]
    assert package_working_dir(str(tmp_path))[0] == pkg_id  # content-addressed
    (tmp_path / "src" / "model.py").write_text("X = 2\n")
    assert package_working_dir(str(tmp_path))[0] != pkg_id
    (tmp_path / ".gitignore").write_text("")
    with pytest.raises(ConfigError, match="upload limit.*gitignore"):
        package_working_dir(str(tmp_path), limit_bytes=1000)
    with pytest.raises(ConfigError, match="not a folder"):
        package_working_dir(str(tmp_path / "missing"))


def test_sse_parser():
    lines = ["event: status", 'data: {"a": 1}', "", ": keep-alive", "", "data: x", "data: y", ""]
    assert list(parse_sse(iter(lines))) == [("status", '{"a": 1}'), ("message", "x\ny")]


def test_server_file_lives_under_home(home):
    assert client.server_file_path() == os.path.join(str(home), ".tandem", "server.json")


def test_a_trial_jobs_shown_word_reads_as_its_job_state():
    """/api/jobs shows a Tune trial's ended job with Ray's trial word; a quick trial can end
    before its submission is answered, and the client read that word as a job state
    ("'TERMINATED' is not a valid JobStatus", seen in result_throughput on a server)."""
    from tandem.jobs.client.remote import shown_status
    from tandem.jobs.spec import JobStatus
    from tandem.server.vocabulary import TRIAL_END_WORDS, shown_job_state

    meta = {"trial_id": "t1"}
    for state in JobStatus:
        word = shown_job_state(state.value, meta)
        back = shown_status(word)
        assert back.is_terminal == state.is_terminal
        assert back is state or word in TRIAL_END_WORDS.values()
    assert shown_status("ERROR") is JobStatus.FAILED
    assert shown_status("TERMINATED") is JobStatus.FINISHED


def test_the_client_verifies_https_and_skips_the_ca_bundle_for_plain_http():
    """Loading the default CA bundle took 0.1-0.25 s of a Tuner's first request to a
    plain-HTTP server; an HTTPS server's certificate is still checked."""
    import ssl

    from tandem.jobs.client.connection import ServerConnection

    secure = ServerConnection("https://127.0.0.1:1", None)
    plain = ServerConnection("http://127.0.0.1:1", None)
    try:
        context = secure.http._transport._pool._ssl_context
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert plain.http._transport._pool._ssl_context.verify_mode == ssl.CERT_NONE
    finally:
        secure.close()
        plain.close()


def _names(data: bytes) -> list[str]:
    return sorted(zipfile.ZipFile(io.BytesIO(data)).namelist())


@pytest.mark.parametrize("in_git", [False, True], ids=["walked", "git-listed"])
def test_package_leaves_out_excludes_rayignore_and_cache_folders(tmp_path, in_git):
    """Ray's ``excludes`` and ``.rayignore``, and a folder tagged ``CACHEDIR.TAG`` (a train
    server's storage folder inside the working_dir), stay out, listed by git or walked."""
    import subprocess

    from tandem.jobs.client.packaging import write_cachedir_tag

    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "big.csv").write_text("1,2\n")
    (tmp_path / "ckpt.pt").write_text("w")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / ".rayignore").write_text("scratch_*\n")
    (tmp_path / "lib" / "model.py").write_text("X = 1\n")
    (tmp_path / "lib" / "scratch_1.py").write_text("x")
    (tmp_path / "srv" / "packages" / "abc").mkdir(parents=True)
    (tmp_path / "srv" / "packages" / "abc" / "train.py").write_text("old")
    write_cachedir_tag(str(tmp_path / "srv"), "a test server's storage")
    if in_git:
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    _, data = package_working_dir(str(tmp_path), excludes=["data/", "*.pt"])
    assert _names(data) == ["lib/.rayignore", "lib/model.py", "train.py"]
    _, data = package_working_dir(str(tmp_path))
    assert _names(data) == ["ckpt.pt", "data/big.csv", "lib/.rayignore", "lib/model.py",
                            "train.py"]


def test_a_train_server_tags_its_storage_so_no_upload_takes_it(tmp_path):
    from tandem.server.config import ServerConfig
    from tandem.server.core import TrainServer

    server = TrainServer(ServerConfig(storage=str(tmp_path / "srv"), num_cpus=1,
                                      usage_interval_s=0))
    try:
        (tmp_path / "train.py").write_text("print(1)\n")
        _, data = package_working_dir(str(tmp_path))
        assert _names(data) == ["train.py"]
        with open(tmp_path / "srv" / "CACHEDIR.TAG", "rb") as f:
            assert f.readline().strip() == b"Signature: 8a477f597d28d172789f06886806bc55"
    finally:
        server.close()
