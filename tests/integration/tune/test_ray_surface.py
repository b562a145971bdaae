"""Ray names added for issue 21's table: Experiment / run_experiments / register_trainable,
create_scheduler / create_searcher, pretty_print, checkpoint metadata, train.collective,
the tune context's train getters."""

from __future__ import annotations

import os

import pytest
import yaml

from tandem import train, tune
from tandem.train import Checkpoint, DataParallelTrainer, ScalingConfig
from tandem.tune import schedulers


def _objective(config):
    ctx = tune.get_context()
    tune.report({"score": config["x"], "world": ctx.get_world_size(),
                 "rank": ctx.get_world_rank()})


def test_experiment_registry_and_run_experiments(tmp_path):
    tune.register_trainable("objective", _objective)
    exp = tune.Experiment("exp_a", run="objective", config={"x": tune.grid_search([1, 2])},
                          storage_path=str(tmp_path), stop={"training_iteration": 1})
    analysis = tune.run(exp, verbose=0)
    assert sorted(t.last_result["score"] for t in analysis.trials) == [1, 2]
    assert all(t.last_result["world"] == 1 and t.last_result["rank"] == 0
               for t in analysis.trials)
    assert os.path.isdir(tmp_path / "exp_a")
    trials = tune.run_experiments({"exp_b": {"run": _objective, "config": {"x": 3},
                                             "storage_path": str(tmp_path)}}, verbose=0)
    assert [t.last_result["score"] for t in trials] == [3]
    grid = tune.Tuner("objective", param_space={"x": 5},
                      run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0)).fit()
    assert grid[0].metrics["score"] == 5
    with pytest.raises(ValueError, match="registered"):
        tune.run("nothing_by_that_name")
    with pytest.raises(DeprecationWarning):
        tune.Experiment("e", run=_objective, local_dir=str(tmp_path))


def test_factories_and_pretty_print():
    asha = tune.create_scheduler("async_hyperband", metric="loss", mode="min", max_t=7,
                                 not_a_parameter=1)
    assert isinstance(asha, schedulers.AsyncHyperBandScheduler) and asha._max_t == 7
    assert type(tune.create_scheduler("fifo")).__name__ == "FIFOScheduler"
    assert type(tune.create_searcher("random")).__name__ == "BasicVariantGenerator"
    with pytest.raises(ValueError, match="must be one of"):
        tune.create_scheduler("nope")
    from tandem.tune.logger import pretty_print

    text = pretty_print({"loss": 0.5, "config": {"a": 1}, "skip": None, "n": 3},
                        exclude={"n"})
    assert yaml.safe_load(text) == {"loss": 0.5}


def test_checkpoint_metadata(tmp_path):
    ckpt = Checkpoint.from_directory(str(tmp_path))
    assert ckpt.get_metadata() == {}
    ckpt.set_metadata({"epoch": 3})
    ckpt.update_metadata({"loss": 0.1})
    assert Checkpoint(str(tmp_path)).get_metadata() == {"epoch": 3, "loss": 0.1}
    with pytest.raises(TypeError):
        ckpt.set_metadata({"bad": object()})


def _collective_loop(config):
    from tandem.train import collective

    rank = train.get_context().get_world_rank()
    value = collective.broadcast_from_rank_zero({"from": rank})
    collective.barrier()
    train.report({"got": value["from"], "rank": rank})


def test_collective(tmp_path):
    result = DataParallelTrainer(_collective_loop, scaling_config=ScalingConfig(num_workers=2),
                                 run_config=train.RunConfig(storage_path=str(tmp_path),
                                                            verbose=0)).fit()
    assert result.metrics["got"] == 0
    assert train.TRAIN_DATASET_KEY == "train"
