"""Issue 17, item 9, with real trials: TuneConfig's trial name / folder creators do what
Ray's do, and a Trainable class in a Tuner checkpoints at its end by default (Ray's
``checkpoint_at_end=None``)."""

from __future__ import annotations

import os

import pytest

import tandem
from tandem import tune
from tandem._core.errors import ConfigError
from tandem.train import CheckpointConfig, RunConfig

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _cluster():
    tandem.init(num_cpus=2)
    yield


def named(config):
    ctx = tune.get_context()
    tune.report({"seen_name": ctx.get_trial_name(), "dir": os.path.basename(ctx.get_trial_dir()),
                 "x": config["x"]})


def test_trial_name_and_dirname_creators(storage):
    rg = tune.Tuner(
        named,
        param_space={"x": tune.grid_search([1, 2])},
        tune_config=tune.TuneConfig(
            trial_name_creator=lambda t: f"{t.trainable_name}-x{t.config['x']}",
            trial_dirname_creator=lambda t: f"folder_{t.experiment_tag}"),
        run_config=RunConfig(storage_path=storage, name="names", verbose=0),
    ).fit()
    assert rg.num_errors == 0
    by_x = {r.config["x"]: r for r in rg}
    for x, r in by_x.items():
        # the name is what the trial sees as its name; the folder is the dirname creator's
        assert r.metrics["seen_name"] == f"named-x{x}"
        assert os.path.basename(r.path) == r.metrics["dir"]
        assert r.metrics["dir"].startswith("folder_") and f"x={x}" in r.metrics["dir"]
        assert os.path.isfile(os.path.join(r.path, "result.json"))
    assert sorted(os.path.basename(r.path) for r in rg) == sorted(
        d for d in os.listdir(os.path.join(storage, "names")) if d.startswith("folder_"))


def test_a_name_creator_alone_names_the_folder_too(storage):
    rg = tune.Tuner(
        named, param_space={"x": tune.grid_search([3])},
        tune_config=tune.TuneConfig(trial_name_creator=lambda t: f"mine_{t.trial_id}"),
        run_config=RunConfig(storage_path=storage, verbose=0),
    ).fit()
    (r,) = list(rg)
    assert r.metrics["seen_name"].startswith("mine_")
    assert os.path.basename(r.path) == r.metrics["seen_name"]


def test_two_trials_in_one_folder_are_refused(storage):
    with pytest.raises(ConfigError, match=r"trial_dirname_creator.*'same'.*trial_id"):
        tune.Tuner(
            named, param_space={"x": tune.grid_search([1, 2])},
            tune_config=tune.TuneConfig(trial_dirname_creator=lambda t: "same"),
            run_config=RunConfig(storage_path=storage, verbose=0),
        ).fit()


class Counter(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"n": self.n, "done": self.n >= 3}

    def save_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n"), "w") as f:
            f.write(str(self.n))

    def load_checkpoint(self, checkpoint_dir):
        with open(os.path.join(checkpoint_dir, "n")) as f:
            self.n = int(f.read())


def test_a_trainable_class_checkpoints_at_its_end_by_default(storage):
    (r,) = list(tune.Tuner(Counter, run_config=RunConfig(storage_path=storage, verbose=0)).fit())
    assert r.metrics["n"] == 3
    assert r.checkpoint is not None
    with open(os.path.join(r.checkpoint.path, "n")) as f:
        assert f.read() == "3"
    # and checkpoint_at_end=False turns it off, as in Ray
    (r,) = list(tune.Tuner(Counter, run_config=RunConfig(
        storage_path=storage, verbose=0,
        checkpoint_config=CheckpointConfig(checkpoint_at_end=False))).fit())
    assert r.checkpoint is None


def chatty(config):
    import sys

    print(f"out of trial x={config['x']}")
    print(f"err of trial x={config['x']}", file=sys.stderr)
    tune.report({"x": config["x"]})


def test_log_to_file_writes_each_trials_output_into_its_folder(storage):
    """Ray Tune's ``RunConfig(log_to_file=True)``: ``stdout`` and ``stderr`` files in each
    trial's folder hold that trial's own prints (and only its own)."""
    rg = tune.Tuner(
        chatty, param_space={"x": tune.grid_search([1, 2])},
        run_config=RunConfig(storage_path=storage, name="logs", verbose=0, log_to_file=True),
    ).fit()
    assert rg.num_errors == 0
    for r in rg:
        x = r.config["x"]
        with open(os.path.join(r.path, "stdout")) as f:
            out = f.read()
        with open(os.path.join(r.path, "stderr")) as f:
            err = f.read()
        assert f"out of trial x={x}\n" in out and "err of" not in out
        assert f"err of trial x={x}\n" in err and "out of" not in err
        assert f"x={3 - x}" not in out + err


def test_log_to_file_one_name_for_both_with_tune_run(storage):
    analysis = tune.run(chatty, config={"x": tune.grid_search([5])}, storage_path=storage,
                        name="one", verbose=0, log_to_file="both.log")
    (trial,) = analysis.trials
    with open(os.path.join(trial.path, "both.log")) as f:
        text = f.read()
    assert "out of trial x=5" in text and "err of trial x=5" in text


def test_log_to_file_refused_when_malformed_before_any_trial(storage):
    with pytest.raises(ConfigError, match="log_to_file"):
        RunConfig(storage_path=storage, log_to_file=("only-one",))
