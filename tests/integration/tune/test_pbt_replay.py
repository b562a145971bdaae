"""PopulationBasedTrainingReplay on a real Tuner: the trial starts with the policy's first
config and is restarted from its checkpoint with each next config at the recorded steps."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

import tandem
from tandem import tune
from tandem.tune.schedulers import PopulationBasedTrainingReplay

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


def _train(config):
    start = 0
    ckpt = tune.get_checkpoint()
    if ckpt is not None:
        with ckpt.as_directory() as d, open(os.path.join(d, "s.json")) as f:
            start = json.load(f)["step"]
    for step in range(start + 1, 8):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "s.json"), "w") as f:
                json.dump({"step": step}, f)
            tune.report({"lr": config["lr"], "step": step},
                        checkpoint=tune.Checkpoint.from_directory(d))


def test_replay_changes_the_config_at_the_recorded_steps(storage, tmp_path):
    # Ray's policy rows: [trial tag, donor tag, trial iter, donor iter, donor config, new]
    # read backwards, each row's trial must be the next row's donor: the first row is
    # another trial's history, so "b"'s schedule starts at the second
    rows = [["z", "c", 1, 1, {"lr": 0.5}, {"lr": 0.1}],
            ["b", "a", 2, 2, {"lr": 0.1}, {"lr": 0.2}],
            ["b", "b", 4, 4, {"lr": 0.2}, {"lr": 0.3}]]
    policy = tmp_path / "pbt_policy_x.txt"
    policy.write_text("".join(json.dumps(r) + "\n" for r in rows))
    replay = PopulationBasedTrainingReplay(str(policy))
    assert replay.config == {"lr": 0.1}  # where trial "b"'s own schedule starts
    tandem.init(num_cpus=1)
    grid = tune.Tuner(
        _train, tune_config=tune.TuneConfig(scheduler=replay),
        run_config=tune.RunConfig(name="replay", storage_path=storage, verbose=0),
    ).fit()
    assert grid.num_errors == 0
    with open(os.path.join(grid[0].path, "result.json")) as f:
        seen = [(r["step"], r["lr"]) for r in map(json.loads, f) if r]
    assert seen == [(1, 0.1), (2, 0.1), (3, 0.2), (4, 0.2), (5, 0.3), (6, 0.3), (7, 0.3)]
    assert grid[0].config == {"lr": 0.3}


def test_bad_policy_files_are_refused(tmp_path):
    with pytest.raises(ValueError, match="Policy file not found"):
        PopulationBasedTrainingReplay(str(tmp_path / "nope.txt"))
    bad = tmp_path / "bad.txt"
    bad.write_text("not json\n")
    with pytest.raises(ValueError, match="Could not read PBT policy file"):
        PopulationBasedTrainingReplay(str(bad))
