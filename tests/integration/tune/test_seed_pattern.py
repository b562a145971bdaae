"""The seed guide's pattern: a trial function that runs the older Trainer with
TuneReportCallback. The nested train job goes to the same scheduler; it also runs standalone."""

from __future__ import annotations

import pytest

import tandem
from tandem import train, tune
from tandem.train import RunConfig
from tandem.tune.integration.ray_train import TuneReportCallback

pytestmark = pytest.mark.timeout(180)


def train_func(config):
    import torch.distributed as dist

    for i in range(3):
        train.report(loss=config["lr"] * (3 - i), world=dist.get_world_size())
    return train.world_rank()


def train_driver_fn(config):
    trainer = train.Trainer(backend="torch", num_workers=2, logdir=config["logdir"])
    trainer.start()
    returns = trainer.run(train_func, config=config, callbacks=[TuneReportCallback()])
    trainer.shutdown()
    return returns


def test_legacy_trainer_inside_trials_on_a_full_cluster(storage):
    tandem.init(num_cpus=2)
    rg = tune.Tuner(
        train_driver_fn,
        param_space={"lr": tune.grid_search([0.1, 0.2, 0.3]), "logdir": storage + "/train"},
        tune_config=tune.TuneConfig(metric="loss", mode="min"),
        run_config=RunConfig(storage_path=storage, verbose=0),
    ).fit()
    assert rg.num_errors == 0, rg.errors
    assert sorted(r.metrics["loss"] for r in rg) == pytest.approx([0.1, 0.2, 0.3])
    assert all(r.metrics["world"] == 2 and r.metrics["training_iteration"] == 3 for r in rg)
    assert rg.get_best_result().config["lr"] == 0.1
    # standalone: TuneReportCallback does nothing, the run still happens
    assert train_driver_fn({"lr": 0.5, "logdir": storage + "/alone"}) == [0, 1]
    assert tune.get_context().get_trial_id() is None
