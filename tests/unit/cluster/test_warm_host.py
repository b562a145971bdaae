"""The warm host (``tandem warm start``, ``tandem.cluster.warm_host``): fresh driver processes
fork their workers from a host that imported torch once; what a worker sees is what it sees
from a zygote of the driver's own; a killed driver leaves no worker; a host of another key
or a peer of another uid is not served; ``tandem warm stop`` leaves nothing running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time

import psutil
import pytest

from tandem.cluster import warm_host as _host

SRC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "src")

# What a train worker sees, through the host and without it; the driver sets a umask, a
# lower open-files limit, a lower priority, one CPU and a variable of its own first, all of
# which a worker inherits.
FIT = textwrap.dedent('''
    import json, os, resource, sys
    os.umask(0o027)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, 512), hard))
    os.environ["MY_SETTING"] = "from-the-driver"
    os.nice(3)
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:1])
    import psutil
    import tandem
    import tandem.train as train
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    def loop(config):
        import torch
        import torch.distributed as dist
        t = torch.tensor([float(train.get_context().get_world_rank() + 1)])
        dist.all_reduce(t)
        umask = os.umask(0); os.umask(umask)
        me = psutil.Process()
        train.report({"sum": float(t.item()), "pid": os.getpid(),
                      "zygote": me.ppid(), "host": me.parent().ppid(),
                      "env": dict(os.environ), "cwd": os.getcwd(), "sys_path": sys.path,
                      "umask": umask, "nofile": resource.getrlimit(resource.RLIMIT_NOFILE),
                      "nice": os.nice(0), "affinity": sorted(os.sched_getaffinity(0)),
                      "cuda": os.environ.get("CUDA_VISIBLE_DEVICES")})

    result = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                          run_config=RunConfig(storage_path=sys.argv[1])).fit()
    def cmd(p):
        try:
            return " ".join(p.cmdline())
        except psutil.Error:
            return ""
    own = [cmd(p) for p in psutil.Process().children()]
    print("RESULT " + json.dumps({**result.metrics, "driver_children": own,
                                  "driver_has_torch": "torch" in sys.modules}))
''')


def _env(warm_dir: str, **extra: str) -> dict[str, str]:
    env = {**os.environ, _host.DIR_ENV: warm_dir, "CUDA_VISIBLE_DEVICES": "",
           "PYTHONPATH": os.path.abspath(SRC), **extra}
    env.pop("TANDEM_TF_EARLY_IMPORT", None)  # the program's early start on, as by default
    return env


def _run(script: str, args: list[str], env: dict[str, str], cwd: str) -> dict:
    out = subprocess.run([sys.executable, script, *args], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


@pytest.fixture(scope="module")
def host():
    """A host with torch preloaded, in a folder of this module's own."""
    warm_dir = tempfile.mkdtemp(prefix="tw-")
    old = os.environ.get(_host.DIR_ENV)
    os.environ[_host.DIR_ENV] = warm_dir
    saved_pp = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.path.abspath(SRC)  # the drivers' key: the same PYTHONPATH
    try:
        info = _host.start_host(["torch"], idle_timeout_s=600, detach=False)
    finally:
        if saved_pp is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved_pp
    try:
        yield {**info, "dir": warm_dir}
    finally:
        stopped = _host.stop_hosts()
        info["process"].wait(timeout=30)
        if old is None:
            os.environ.pop(_host.DIR_ENV, None)
        else:
            os.environ[_host.DIR_ENV] = old
        assert [s["pid"] for s in stopped] == [info["pid"]]


@pytest.mark.slow
def test_fresh_driver_forks_through_the_host_and_workers_see_what_they_would(host, tmp_path):
    assert "torch" in host["preloaded"] and host["error"] is None
    script = tmp_path / "fit.py"
    script.write_text(FIT)
    work = tmp_path / "work"
    work.mkdir()
    env = _env(host["dir"], CUDA_VISIBLE_DEVICES="")  # the host has none: not keyed
    warm = _run(str(script), [str(tmp_path / "r1")], env, str(work))
    own = _run(str(script), [str(tmp_path / "r2")], {**env, _host.SWITCH_ENV: "0"}, str(work))

    # correct results, from a real all_reduce across the two workers
    assert warm["sum"] == own["sum"] == 3.0
    # forked through the host: the worker's zygote is the host's child, and the driver
    # spawned no zygote (and imported no torch) of its own
    assert warm["host"] == host["pid"]
    assert not any("tandem.cluster._zygote" in c for c in warm["driver_children"])
    assert not warm["driver_has_torch"]
    assert own["host"] != host["pid"]
    assert any("tandem.cluster._zygote" in c for c in own["driver_children"])
    # the worker's world is the same either way
    for key in ("cwd", "sys_path", "umask", "nofile", "cuda", "nice", "affinity"):
        assert warm[key] == own[key], key
    assert warm["umask"] == 0o027 and warm["nofile"][0] <= 512 and warm["cwd"] == str(work)
    assert warm["nice"] >= 3 and len(warm["affinity"]) == 1
    differ = (_host.SWITCH_ENV, "MASTER_PORT")  # the switch itself; a free port per run
    warm_env = {k: v for k, v in warm["env"].items() if k not in differ}
    own_env = {k: v for k, v in own["env"].items() if k not in differ}
    assert warm_env == own_env
    assert warm_env["MY_SETTING"] == "from-the-driver"
    # the host learned what the driver's zygote imported for it
    status = _host.request(host["socket"], "status")
    assert status["served"] >= 1 and status["learned"] > 0


KILLED = textwrap.dedent('''
    import os, sys, time
    import tandem.train as train
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer

    def loop(config):
        rank = train.get_context().get_world_rank()
        with open(os.path.join(sys.argv[2], f"{rank}.pid"), "w") as f:
            f.write(str(os.getpid()))
        while True:
            time.sleep(1)

    TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=2),
                 run_config=RunConfig(storage_path=sys.argv[1])).fit()
''')


@pytest.mark.slow
def test_a_killed_driver_leaves_no_worker_and_other_keys_are_not_served(host, tmp_path):
    script = tmp_path / "killed.py"
    script.write_text(KILLED)
    pids = tmp_path / "pids"
    pids.mkdir()
    driver = subprocess.Popen([sys.executable, str(script), str(tmp_path / "r"), str(pids)],
                              env=_env(host["dir"]), cwd=str(tmp_path),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 180
        while len(os.listdir(pids)) < 2 and time.monotonic() < deadline:
            assert driver.poll() is None
            time.sleep(0.05)
        workers = [psutil.Process(int((pids / f"{r}.pid").read_text())) for r in (0, 1)]
        zygote = workers[0].parent()
        assert zygote.ppid() == host["pid"]  # forked through the host
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    gone, alive = psutil.wait_procs([*workers, zygote], timeout=30)
    assert not alive, f"left behind after the driver's SIGKILL: {alive}"

    # a driver whose imports would differ (another OpenMP setting) gets no zygote from it
    served = _host.request(host["socket"], "status")["served"]
    probe = textwrap.dedent('''
        from tandem.cluster import warm_host as _host
        z = _host.connect()
        print("RESULT", "null" if z is None else z.pid)
    ''')
    (tmp_path / "probe.py").write_text(probe)
    assert _run(str(tmp_path / "probe.py"), [], _env(host["dir"], OMP_NUM_THREADS="3"),
                str(tmp_path)) is None
    assert _host.request(host["socket"], "status")["served"] == served


def test_only_the_hosts_own_uid_is_admitted(monkeypatch):
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with a, b:
        assert _host.peer_uid(a) == os.getuid()  # the kernel's credentials of the peer
        assert _host.admit(a)
        monkeypatch.setattr(_host.os, "getuid", lambda: os.geteuid() + 1)
        assert not _host.admit(a)  # another uid's peer: refused before anything is read


def test_warm_folder_must_be_private(tmp_path):
    d = tmp_path / "open"
    d.mkdir(mode=0o755)
    os.chmod(d, 0o755)
    with pytest.raises(PermissionError, match="mode 0700"):
        _host._ensure_dir(str(d))
    with pytest.raises(ValueError, match="not a module name"):
        _host.start_host(["torch; rm -rf /"])


@pytest.mark.slow
def test_cli_start_status_stop_leaves_no_process(tmp_path):
    env = {**os.environ, _host.DIR_ENV: str(tmp_path / "w"),
           "PYTHONPATH": os.path.abspath(SRC)}
    tandem = [sys.executable, "-m", "tandem.cli"]
    start = subprocess.run([*tandem, "warm", "start", "--json", "--idle-timeout", "60"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert start.returncode == 0, start.stderr
    pid = json.loads(start.stdout)["pid"]
    try:
        status = subprocess.run([*tandem, "warm", "status"], env=env, capture_output=True,
                                text=True, timeout=60)
        assert f"warm host pid {pid}" in status.stdout
    finally:
        stop = subprocess.run([*tandem, "warm", "stop"], env=env, capture_output=True,
                              text=True, timeout=60)
    assert f"stopped the warm host pid {pid}" in stop.stdout
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert not [f for f in os.listdir(tmp_path / "w") if f.endswith(".sock")]
    after = subprocess.run([*tandem, "warm", "status"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert after.returncode == 1 and "no warm host is running" in after.stdout


SERVE = textwrap.dedent('''
    import json, os, sys
    import httpx, psutil, torch
    from tandem import model

    class Tiny(model.TorchModel):
        def setup(self):
            torch.manual_seed(0)
            self.net = torch.nn.Linear(4, 1)

        def forward(self, x):
            return self.net(x)

    m = Tiny()
    m.setup()
    x = [[1.0, 2.0, 3.0, 4.0]]
    handle = model.serve(m)
    try:
        r = httpx.post(handle.url + "/predict", json={"inputs": x}, timeout=60)
        replica = psutil.Process(list(handle.status()["pids"].values()).pop())
        print("RESULT " + json.dumps({
            "status": r.status_code, "outputs": r.json()["outputs"],
            "want": m.predict(torch.tensor(x)).reshape(-1).tolist(),
            "host": replica.parent().ppid()}))
    finally:
        handle.stop()
''')


@pytest.mark.slow
def test_a_served_models_replica_starts_through_the_host(host, tmp_path):
    (tmp_path / "serve.py").write_text(SERVE)
    got = _run(str(tmp_path / "serve.py"), [], _env(host["dir"]), str(tmp_path))
    assert got["status"] == 200
    assert got["outputs"][0][0] == pytest.approx(got["want"][0], abs=1e-6)
    assert got["host"] == host["pid"]  # the replica forked from a zygote the host forked


@pytest.mark.slow
def test_auto_starts_a_host_that_the_next_program_uses(tmp_path):
    warm_dir = str(tmp_path / "auto")
    (tmp_path / "probe.py").write_text(textwrap.dedent('''
        import psutil
        from tandem.cluster import warm_host
        z = warm_host.connect()
        print("RESULT", "null" if z is None else psutil.Process(z.pid).ppid())
    '''))
    env = _env(warm_dir, **{_host.SWITCH_ENV: "auto"})
    try:
        first = _run(str(tmp_path / "probe.py"), [], env, str(tmp_path))
        second = _run(str(tmp_path / "probe.py"), [], env, str(tmp_path))
    finally:
        old = os.environ.get(_host.DIR_ENV)
        os.environ[_host.DIR_ENV] = warm_dir
        try:
            stopped = _host.stop_hosts()
        finally:
            if old is None:
                os.environ.pop(_host.DIR_ENV)
            else:
                os.environ[_host.DIR_ENV] = old
    assert first is not None and first == second  # one host, started by the first program
    assert [s["pid"] for s in stopped] == [first]
    assert not psutil.pid_exists(first) or psutil.Process(first).status() == psutil.STATUS_ZOMBIE


@pytest.mark.slow
def test_a_host_exits_once_tandems_source_changes(tmp_path):
    """An edit of tandem's code (here: a copy of it) ends the host within seconds, so no
    program forks workers with the old code; it then uses its own zygote again."""
    import shutil

    src = tmp_path / "src"
    shutil.copytree(os.path.join(SRC, "tandem"), src / "tandem",
                    ignore=shutil.ignore_patterns("__pycache__"))
    env = {**os.environ, _host.DIR_ENV: str(tmp_path / "w"), "PYTHONPATH": str(src)}
    start = subprocess.run([sys.executable, "-m", "tandem.cli", "warm", "start", "--json"],
                           env=env, capture_output=True, text=True, timeout=120,
                           cwd=str(tmp_path))
    assert start.returncode == 0, start.stderr
    host = psutil.Process(json.loads(start.stdout)["pid"])
    try:
        edited = src / "tandem" / "cluster" / "warm_host.py"
        # newer than every file of the copy (copytree keeps their times; a file edited
        # after warm_host.py, in a branch or a merge, must not hide the edit)
        later = max(f.stat().st_mtime for f in src.rglob("*.py")) + 10
        os.utime(edited, (later, later))
        host.wait(timeout=30)  # psutil.TimeoutExpired if it kept running
    finally:
        subprocess.run([sys.executable, "-m", "tandem.cli", "warm", "stop"], env=env,
                       capture_output=True, timeout=60, cwd=str(tmp_path))
    assert not [f for f in os.listdir(tmp_path / "w") if f.endswith(".sock")]
    assert "tandem's source changed" in (tmp_path / "w" / "host.log").read_text()
