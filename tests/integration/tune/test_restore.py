"""SIGKILL the driver mid-experiment, then Tuner.restore: nothing finished runs again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import tandem
from tandem import tune

pytestmark = pytest.mark.timeout(180)

SCRIPT = textwrap.dedent(
    """
    import os, sys, tempfile, time
    import tandem
    from tandem import tune
    from tandem.train import Checkpoint, RunConfig

    def trainable(config):
        ckpt = tune.get_checkpoint()
        start = 0
        if ckpt:
            with ckpt.as_directory() as d:  # a local folder, or a download from a URL
                start = int(open(os.path.join(d, "step")).read())
        with open(os.path.join(config["log"], f"start_{config['i']}_{start}"), "w"):
            pass
        for step in range(start, config["steps"]):
            time.sleep(config["sleep"])
            with tempfile.TemporaryDirectory() as d:
                open(os.path.join(d, "step"), "w").write(str(step + 1))
                tune.report({"step": step + 1}, checkpoint=Checkpoint.from_directory(d))

    if __name__ == "__main__":
        tandem.init(num_cpus=2)
        tune.Tuner(
            trainable,
            param_space={"i": tune.grid_search([0, 1, 2, 3]),
                         "steps": tune.sample_from(lambda spec: 2 if spec.config.i < 2 else 40),
                         "sleep": 0.1, "log": sys.argv[2]},
            run_config=RunConfig(storage_path=sys.argv[1], name="exp", verbose=0),
        ).fit()
    """
)


@pytest.mark.parametrize("where", ["folder", "url"])
def test_restore_after_driver_sigkill(where, storage, tmp_path, monkeypatch):
    """``url``: the experiment goes to an fsspec URL (``local://`` takes the path, so this
    test can look inside), as to s3://...; its state is uploaded and restored from there."""
    script = tmp_path / "driver.py"
    script.write_text(SCRIPT)
    log = tmp_path / "log"
    log.mkdir()
    target = f"local://{storage}" if where == "url" else storage
    proc = subprocess.Popen([sys.executable, str(script), target, str(log)],
                            start_new_session=True)
    exp = os.path.join(storage, "exp")
    # wait until the two short trials finished and the long ones have checkpoints
    deadline = time.monotonic() + 60
    state = os.path.join(exp, "experiment_state.json")
    while time.monotonic() < deadline:
        if os.path.exists(state):
            import json

            try:
                trials = json.load(open(state))["trials"]
            except ValueError:
                trials = []
            done = [t for t in trials if t["status"] == "TERMINATED"]
            ckpts = [t for t in trials if t["status"] == "RUNNING" and t["last_result"]
                     and t["last_result"]["step"] >= 3]
            if len(done) == 2 and len(ckpts) == 2:
                break
        time.sleep(0.05)
    else:
        proc.kill()
        pytest.fail("the experiment did not get far enough")
    os.killpg(proc.pid, signal.SIGKILL)  # the driver and everything it started
    proc.wait()

    monkeypatch.syspath_prepend(str(tmp_path))  # the user's script folder, as when re-run
    import driver  # the trainable, importable as the user's module
    tandem.init(num_cpus=2)
    exp_target = f"local://{exp}" if where == "url" else exp
    assert tune.Tuner.can_restore(exp_target)
    rg = tune.Tuner.restore(exp_target, trainable=driver.trainable).fit()
    assert rg.num_errors == 0 and len(rg) == 4, [str(r.error)[-1500:] for r in rg if r.error]
    assert sorted(r.metrics["step"] for r in rg) == [2, 2, 40, 40]
    starts = sorted(os.listdir(log))
    # the short trials ran once; the long ones started at 0, then resumed from a checkpoint
    assert [s for s in starts if s.startswith(("start_0", "start_1"))] == ["start_0_0", "start_1_0"]
    for i in (2, 3):
        mine = sorted(int(s.split("_")[2]) for s in starts if s.startswith(f"start_{i}_"))
        assert mine[0] == 0 and len(mine) == 2 and mine[1] >= 3
