"""Test hygiene: every test starts with no tandem service and leaves no process behind,
and the whole session runs in a home folder of its own.

The isolation happens here, at import, before ``tandem`` is imported: ``HOME`` is a fresh
temporary folder (so no test finds ``~/.tandem/server.json`` of a server that another test
or a person started, and nothing is written to the real home), and the ``TANDEM_*``
variables that point at servers, tokens or storage are removed. Tests that need a server
start their own; tests that need a variable set it themselves.
"""

from __future__ import annotations

import functools
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
from tests.processes import _alive, _warm  # noqa: E402

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
def _no_leftover_processes(request):
    before = {p.pid for p in _descendants()}
    hosts_before = _warm_hosts()
    yield
    _ray_only_in_its_group(request.node)
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


#: The processes of a local Ray cluster that ``ray.init`` starts as its children.
RAY_PROCESSES = ("raylet", "gcs_server")


def _ray_only_in_its_group(item: pytest.Item) -> None:
    """A test that leaves a local Ray cluster running (for its file's next tests) must be in
    a file marked ``ray_cluster``: under pytest-xdist, two Ray clusters at once on a
    2-core machine starve each other's health checks."""
    if _starts_ray(str(item.path)):
        return
    ray = [p for p in _descendants() if _name(p) in RAY_PROCESSES]
    assert not ray, (f"{item.nodeid} left a local Ray cluster running ({[_name(p) for p in ray]})"
                     f" but its file is not marked ray_cluster: add pytest.mark.ray_cluster to "
                     f"its pytestmark so it runs in the tests' Ray group")


def _name(p: psutil.Process) -> str:
    try:
        return p.name()
    except psutil.Error:
        return "?"


def _pooled_by_older_zygote(p: psutil.Process, before: set[int]) -> bool:
    """A warm worker waiting for a job, kept by a zygote that existed before the test (a
    server fixture's): it belongs to that fixture's pool, not to the test."""
    try:
        return _warm(p) and p.ppid() in before
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


def pytest_unconfigure(config):
    shutil.rmtree(SESSION_HOME, ignore_errors=True)


#: What a test file that starts a local Ray cluster puts in its ``pytestmark``.
RAY_CLUSTER_MARK = "pytest.mark.ray_cluster"


@functools.cache
def _starts_ray(path: str) -> bool:
    """Whether the test file at ``path`` is marked ``ray_cluster`` (read from its text: the
    xdist scheduler runs in the controlling process, which collects no test)."""
    try:
        with open(path, encoding="utf-8") as f:
            return RAY_CLUSTER_MARK in f.read()
    except OSError:
        return False


def _xdist_group(nodeid: str, root: str = ".") -> str:
    """The group a test runs in under pytest-xdist: its file; every file marked
    ``ray_cluster`` shares the group "ray"."""
    path = nodeid.split("::")[0]
    return "ray" if _starts_ray(os.path.join(root, path)) else path


def _group_rank(group: str, root: str) -> int:
    """0 for the Ray group, 1 for a file with slow tests, 2 for the rest."""
    if group == "ray":
        return 0
    try:
        with open(os.path.join(root, group), encoding="utf-8") as f:
            return 1 if "pytest.mark.slow" in f.read() else 2
    except OSError:
        return 2


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

    root = str(config.rootpath)

    class FileAndRayGroups(LoadScopeScheduling):
        """Whole groups go to the test processes longest first, as near as the files tell:
        the Ray group (the longest by far), then files with slow tests, each kind by its
        number of tests, so no long group is left to run alone at the end."""

        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            return _xdist_group(nodeid, root)

        def _assign_work_unit(self, node) -> None:
            if not self._ordered:
                self._ordered = True
                groups = sorted(self.workqueue.items(), key=lambda g: (
                    _group_rank(g[0], root), -len(g[1])))
                self.workqueue.clear()
                self.workqueue.update(groups)
            super()._assign_work_unit(node)

    return FileAndRayGroups(config, log)
