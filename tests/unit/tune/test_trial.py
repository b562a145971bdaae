from __future__ import annotations

import pickle
import tracemalloc

import pytest

from tandem.tune.trial import Trial, TrialStatus


def test_status_terminal_flags():
    assert {s for s in TrialStatus if s.is_terminal} == {TrialStatus.TERMINATED, TrialStatus.ERROR}
    assert TrialStatus.PAUSED.is_live


def test_trial_defaults_and_pickle():
    t = Trial("fn", trial_id="t1", config={"lr": 0.1}, experiment_tag="0_lr=0.1")
    assert t.status is TrialStatus.PENDING and t.last_result is None and t.checkpoint is None
    assert t.num_failures == 0 and not t.is_finished()
    t2 = pickle.loads(pickle.dumps(t))
    assert (t2.trial_id, t2.config, t2.experiment_tag) == ("t1", {"lr": 0.1}, "0_lr=0.1")


def test_ten_thousand_trials_are_small():
    tracemalloc.start()
    trials = [
        Trial("fn", trial_id=f"trial_{i:05d}", config={"lr": 0.001 * i, "bs": 32, "opt": {"name": "adam"}})
        for i in range(10_000)
    ]
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(trials) == 10_000
    assert peak < 20 * 2**20  # well under the 300 MB controller budget


def test_rays_constructor_parameters_are_kept_and_used(tmp_path):
    from tandem.train import CheckpointConfig
    from tandem.train.context import StorageContext
    from tandem.tune.execution.placement_groups import PlacementGroupFactory

    pgf = PlacementGroupFactory([{"CPU": 2}])
    storage = StorageContext(str(tmp_path), "exp")
    t = Trial(
        "my_fn", config={"lr": 0.1, "bs": 8}, trial_id="abc", storage=storage,
        evaluated_params={"lr": 0.1}, experiment_tag="0_lr=0.1",
        placement_group_factory=pgf, stopping_criterion={"acc": 0.9, "training_iteration": 5},
        checkpoint_config=CheckpointConfig(checkpoint_frequency=3, checkpoint_at_end=True),
        export_formats=["model"], restore_path=str(tmp_path),
        trial_name_creator=lambda tr: f"{tr.trainable_name}-{tr.config['lr']}",
        trial_dirname_creator=lambda tr: f"dir_{tr.trial_id}",
        log_to_file=("out.txt", "err.txt"), max_failures=2, stub=True,
    )
    assert (t.trainable_name, t.trial_id, t.config, t.storage) == ("my_fn", "abc",
                                                                   {"lr": 0.1, "bs": 8}, storage)
    assert t.evaluated_params == {"lr": 0.1} and t.experiment_tag == "0_lr=0.1"
    assert t.placement_group_factory.required_resources == {"CPU": 2}
    # stopping_criterion: Ray's should_stop (>=, a missing key does not stop, done does)
    assert not t.should_stop({"acc": 0.5, "training_iteration": 1})
    assert t.should_stop({"acc": 0.95}) and t.should_stop({"training_iteration": 5})
    assert t.should_stop({"done": True}) and not t.should_stop({"loss": 1})
    assert (t.checkpoint_freq, t.checkpoint_at_end) == (3, True)
    assert t.export_formats == ["model"]
    assert t.checkpoint is not None and t.checkpoint.path == str(tmp_path)  # starts from it
    assert str(t) == "my_fn-0.1" and t.custom_dirname == "dir_abc"
    assert t.log_to_file == ("out.txt", "err.txt") and t.stub
    # max_failures: Ray's should_recover
    assert t.should_recover()
    t.num_failures = 3
    assert not t.should_recover()
    t2 = pickle.loads(pickle.dumps(Trial("fn", trial_id="x", max_failures=-1)))
    assert t2.should_recover() and t2.trial_id == "x"


def test_rays_defaults_and_refusals():
    t = Trial("fn")
    assert len(t.trial_id) == 8 and t.trial_id != Trial("fn").trial_id  # generate_id
    assert t.config == {} and t.evaluated_params == {} and t.stopping_criterion == {}
    assert t.log_to_file == (None, None) and t.max_failures == 0 and t.checkpoint is None
    assert (t.checkpoint_freq, t.checkpoint_at_end) == (0, False) and str(t) == f"fn_{t.trial_id}"
    assert Trial.PENDING is TrialStatus.PENDING and t.status is Trial.PENDING
    with pytest.raises(ValueError, match="must not contain '/'"):
        Trial("fn", trial_dirname_creator=lambda tr: "a/b")
    with pytest.raises(TypeError, match="name of the trainable"):
        Trial({"lr": 0.1})  # type: ignore[arg-type]
