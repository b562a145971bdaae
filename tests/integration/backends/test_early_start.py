"""Every framework's imports start early (``tandem.jobs.early.start_early``):
``import tandem.train.torch`` / ``tandem.model`` start the zygote (the process workers fork
from) importing torch while the program goes on; the first fit forks from it; none starts
when jobs go to a server or when switched off; one left unused is ended when the job
service turns out remote, and after its idle time.

tests/conftest.py switches early imports off for the session; these tests turn them on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

from tandem.cluster.local import discard_early_zygote, early_zygote_modules, early_zygote_pid
from tandem.jobs import runtime
from tandem.jobs.early import early_import_enabled, start_early
from tests.helpers.zygotes import zygotes

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="needs torch")


def test_switches_and_remote_jobs_start_no_zygote(monkeypatch):
    import tandem.cluster._worker_main  # noqa: F401 - a driver may import it: still no worker

    monkeypatch.delenv("TANDEM_EARLY_IMPORT", raising=False)
    monkeypatch.setenv("TANDEM_TF_EARLY_IMPORT", "0")  # the older name still switches it off
    assert not early_import_enabled() and not start_early(("json",))
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")  # the new name wins over the old
    assert early_import_enabled()
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "off")
    assert not start_early(("json",)) and not zygotes()
    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    monkeypatch.setenv("TANDEM_ADDRESS", "http://127.0.0.1:9")  # jobs go to a server
    assert not start_early(("json",)) and not zygotes()
    assert early_zygote_modules() is None


def test_an_unused_early_zygote_is_ended_when_jobs_go_to_a_server(monkeypatch):
    import tandem.cluster._worker_main  # noqa: F401

    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    monkeypatch.setenv("TANDEM_ADDRESS", "local")
    assert runtime.current_service() is None
    try:
        assert start_early(("json",))
        # a second framework adds its modules to the same zygote (no second process)
        assert start_early(("json", "csv"))
        assert early_zygote_modules() == ("json", "csv")
        [early] = zygotes()
        assert early.pid == early_zygote_pid()
        # the program then turns to a train server: the zygote would wait unused until exit
        monkeypatch.setenv("TANDEM_ADDRESS", "http://127.0.0.1:9")
        service = runtime.get_service()
        assert type(service).__name__ == "RemoteJobService"
        early.wait(timeout=60)  # ended, not left behind
        assert early_zygote_pid() is None and not zygotes()
        assert not start_early(("json",))  # and no new one starts for remote jobs
    finally:
        runtime.set_service(None)
        discard_early_zygote()


def test_an_early_zygote_no_cluster_adopts_is_ended_after_its_idle_time(monkeypatch):
    import tandem.cluster._worker_main  # noqa: F401

    monkeypatch.setenv("TANDEM_EARLY_IMPORT", "1")
    monkeypatch.setenv("TANDEM_ADDRESS", "local")
    monkeypatch.setenv("TANDEM_EARLY_IDLE_S", "0.5")
    try:
        assert start_early(("json",))
        [early] = zygotes()
        early.wait(timeout=60)  # its idle time passed with no cluster adopting it
        assert early_zygote_pid() is None
    finally:
        discard_early_zygote()


PROGRAM = textwrap.dedent("""
    import json, os, sys
    from tandem.cluster.local import early_zygote_modules, early_zygote_pid
    from tandem.train import RunConfig, ScalingConfig
    from tandem.train.torch import TorchTrainer  # starts torch's import in a zygote
    after_torch = early_zygote_pid(), early_zygote_modules()
    import tandem.model  # adds the model layer's modules to the same zygote
    after_model = early_zygote_pid(), early_zygote_modules()
    import tandem

    def fn(config):
        from tandem import train
        rank = train.get_context().get_world_rank()
        with open(os.path.join(config["out"], f"rank{rank}.ppid"), "w") as f:
            f.write(str(os.getppid()))
        train.report({"x": 1})

    result = TorchTrainer(fn, train_loop_config={"out": sys.argv[2]},
                          scaling_config=ScalingConfig(num_workers=2),
                          run_config=RunConfig(storage_path=sys.argv[1], verbose=0)).fit()
    assert result.error is None, result.error
    ppids = [int(open(os.path.join(sys.argv[2], f"rank{r}.ppid")).read()) for r in (0, 1)]
    print(json.dumps({"after_torch": after_torch, "after_model": after_model, "ppids": ppids,
                      "torch_in_driver": "torch" in sys.modules,
                      "still_early": early_zygote_pid()}))
    tandem.shutdown()
""")


@needs_torch
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_first_fit_after_import_tandem_train_torch_forks_from_the_early_zygote(storage,
                                                                                tmp_path):
    env = {**os.environ, "TANDEM_EARLY_IMPORT": "1", "TANDEM_ADDRESS": "local"}
    out = subprocess.run([sys.executable, "-c", PROGRAM, storage, str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=280)
    assert out.returncode == 0, out.stderr[-3000:]
    run = json.loads(out.stdout.strip().splitlines()[-1])
    pid, modules = run["after_torch"]
    assert pid is not None and "torch" in modules and "torch.distributed" in modules
    # tandem.model's modules went to the same zygote, after torch's
    assert run["after_model"][0] == pid
    assert run["after_model"][1][: len(modules)] == modules
    assert "tandem.model.serve._replica" in run["after_model"][1]
    # both workers of the gang forked from it; the cluster adopted it; torch stayed out of
    # the driver
    assert run["ppids"] == [pid, pid]
    assert run["still_early"] is None
    assert run["torch_in_driver"] is False


def test_tandem_s_own_imports_of_the_model_layer_start_nothing():
    from tandem.model import _early

    assert not _early.imported_by_tandem()  # a program (this test) imports it
    # the CLI's `tandem models ...` or a train server importing the registry
    scope = {"f": _early.imported_by_tandem}
    exec(compile("r = f()", _early._TANDEM_DIR + "cli.py", "exec"), scope)
    assert scope["r"] is True
