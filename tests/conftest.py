"""Test hygiene: every test starts with no tandem service and leaves no process behind,
and the whole session runs in a home folder of its own.

The isolation happens here, at import, before ``tandem`` is imported: ``HOME`` is a fresh
temporary folder (so no test finds ``~/.tandem/server.json`` of a server that another test
or a person started, and nothing is written to the real home), and the ``TANDEM_*``
variables that point at servers, tokens or storage are removed. Tests that need a server
start their own; tests that need a variable set it themselves.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time

#: TANDEM_* variables that configure the test machinery itself, kept from the caller's
#: environment; every other TANDEM_* variable is removed for the session.
KEPT_ENV = ("TANDEM_PG_BIN", "TANDEM_PG_USER", "TANDEM_CHROMIUM", "TANDEM_TEST_POSTGRES_URL",
            "TANDEM_UPDATE_COMPAT", "TANDEM_CI_VENV", "TANDEM_CI_KEEP_VENV")
REAL_HOME = os.path.expanduser("~")
SESSION_HOME = tempfile.mkdtemp(prefix="tandem-tests-home-")
os.environ["HOME"] = SESSION_HOME
for _key in [k for k in os.environ if k.startswith("TANDEM_") and k not in KEPT_ENV]:
    del os.environ[_key]
# every early start off (TANDEM_EARLY_IMPORT, read under its older name, which the TF tests
# set): importing tandem.train.tensorflow/torch at collection, or a Tuner or trainer built in
# a test, would start a zygote that a later test's cluster adopts; their own tests turn it on
os.environ["TANDEM_TF_EARLY_IMPORT"] = "0"

import psutil  # noqa: E402 - after the isolation above
import pytest  # noqa: E402

import tandem  # noqa: E402

pytest_plugins = []
if os.path.exists(os.path.join(os.path.dirname(__file__), "conftest_postgres.py")):
    pytest_plugins.append("tests.conftest_postgres")


def _descendants() -> list[psutil.Process]:
    try:
        return psutil.Process().children(recursive=True)
    except psutil.Error:
        return []


def _warm_hosts() -> dict[str, int]:
    """The warm hosts (``tandem warm start``) answering in this session's folder for them:
    socket -> pid. One started detached (the CLI, ``TANDEM_WARM_HOST=auto``) is no
    descendant of the test, so the descendants' check alone would not see it."""
    from tandem.cluster import warm_host as _host

    return {h["socket"]: h["pid"] for h in _host.running_hosts()}


@pytest.fixture(autouse=True)
def _no_leftover_processes():
    before = {p.pid for p in _descendants()}
    hosts_before = _warm_hosts()
    yield
    tandem.shutdown()
    new_hosts = {s: pid for s, pid in _warm_hosts().items() if s not in hosts_before}
    if new_hosts:
        from tandem.cluster import warm_host as _host

        _host.stop_hosts()
    assert not new_hosts, f"warm hosts left running: {new_hosts}"
    deadline = time.monotonic() + 10
    left: list[psutil.Process] = []
    while time.monotonic() < deadline:
        left = [p for p in _descendants() if p.pid not in before and _alive(p)
                and not _pooled_by_older_zygote(p, before)]
        if not left:
            break
        time.sleep(0.05)
    for p in left:
        try:
            p.kill()
        except psutil.Error:
            pass
    assert not left, f"processes left behind: {[(p.pid, _cmd(p)) for p in left]}"


def _pooled_by_older_zygote(p: psutil.Process, before: set[int]) -> bool:
    """A warm worker waiting for a job, kept by a zygote that existed before the test (a
    server fixture's): it belongs to that fixture's pool, not to the test."""
    try:
        return _warm(p) and p.ppid() in before
    except psutil.Error:
        return False


def _alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _cmd(p: psutil.Process) -> str:
    try:
        return " ".join(p.cmdline())[:120]
    except psutil.Error:
        return "?"


@pytest.fixture
def storage(tmp_path):
    """A fresh storage folder for runs."""
    path = tmp_path / "results"
    path.mkdir()
    return str(path)


def worker_processes() -> list[psutil.Process]:
    """Live worker processes (children of the zygote) of this test process; warm workers
    waiting for a job (named ``tandem-warm``, see tandem.cluster._pool) are not counted."""
    out = []
    for p in psutil.Process().children(recursive=False):
        try:
            if "tandem.cluster._zygote" in " ".join(p.cmdline()):
                out.extend(c for c in p.children(recursive=True) if _alive(c) and not _warm(c))
        except psutil.Error:
            pass
    return out


def no_workers_left(timeout_s: float = 30.0) -> list[psutil.Process]:
    """``worker_processes()`` once it is empty, or what it still holds after ``timeout_s``.

    A killed worker ends a moment later (longer on a loaded machine), and each look is a
    fresh scan: a warm worker the zygote forks meanwhile is seen under the zygote's name
    for an instant before it names itself ``tandem-warm``, and is not a leftover."""
    deadline = time.monotonic() + timeout_s
    while True:
        left = worker_processes()
        if not left or time.monotonic() >= deadline:
            return left
        psutil.wait_procs(left, timeout=min(1.0, max(0.0, deadline - time.monotonic())))


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_HOME, ignore_errors=True)


def _warm(p: psutil.Process) -> bool:
    try:
        return p.name() == "tandem-warm"
    except psutil.Error:
        return False


def _xdist_group(nodeid: str) -> str:
    """The group a test runs in under pytest-xdist: its file; every test that may start a
    Ray cluster shares the group "ray"."""
    path = nodeid.split("::")[0]
    if "/ray/" in path or "/ray_autoscaling/" in path or "test_ray" in path:
        return "ray"
    return path


def pytest_xdist_make_scheduler(config, log):
    """Groups for pytest-xdist (CI runs ``-n 2 --dist loadgroup``): the tests of one file run
    on one worker, so its module fixtures are made once; every test that starts a Ray
    cluster runs on the same worker, one at a time, since two local Ray clusters on a
    2-core machine starve each other's health checks.

    A scheduler of our own rather than ``xdist_group`` markers: xdist 3.8 adds a marker's
    group to ``item._nodeid``, which pytest 9.2 no longer reads (``Node.nodeid`` is
    ``_id``), so the markers grouped nothing and tests of one file, Ray's included, ran on
    both workers at once."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileAndRayGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _xdist_group(nodeid)

    return FileAndRayGroups(config, log)
