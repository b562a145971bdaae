"""PBT on a real Tuner with more trials than CPUs, past several perturbation points
(issue 17, item 4): trials pause to yield, resume, exploit, and the experiment ends."""

from __future__ import annotations

import importlib.util
import json
import os
import sys

import cloudpickle
import pytest

import tandem
from tandem import tune
from tandem.tune.schedulers import PopulationBasedTraining, PopulationBasedTrainingReplay

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

PROGRAM = os.path.join(
    os.path.dirname(__file__), "..", "..", "e2e", "ray_programs", "pbt_function.py"
)


def _ray_example():
    """Ray's pbt_function example (the port in tests/e2e/ray_programs), as a module."""
    spec = importlib.util.spec_from_file_location("pbt_function_example", PROGRAM)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)  # the workers cannot import it by name
    return module


def test_pbt_with_paused_trials_runs_to_the_end(storage):
    # 4 trials on 2 CPUs, perturbation every 5 iterations, 30 iterations: at each
    # perturbation point a trial yields its slot to a paused one. A trial paused while no
    # trial was pending was handed out for resume before its job had stopped, dropped,
    # and never resumed: fit() waited for ever.
    prog = _ray_example()
    tandem.init(num_cpus=2)
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=5,
        hyperparam_mutations={"lr": tune.uniform(0.0001, 0.02), "some_other_factor": [1, 2]},
        seed=0,
    )
    grid = tune.Tuner(
        prog.pbt_function,
        param_space={"lr": 0.0001, "some_other_factor": 1, "checkpoint_interval": 5},
        tune_config=tune.TuneConfig(
            scheduler=pbt, metric="mean_accuracy", mode="max", num_samples=4
        ),
        run_config=tune.RunConfig(
            name="pbt", storage_path=storage, verbose=0,
            stop={"done": True, "training_iteration": 30},
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_score_attribute="mean_accuracy", num_to_keep=2
            ),
        ),
    ).fit()
    assert grid.num_errors == 0
    assert len(grid) == 4
    for result in grid:
        if result.metrics["done"]:
            continue  # ended early by its own stop criterion
        assert result.metrics["training_iteration"] == 30
        with open(os.path.join(result.path, "result.json")) as f:
            iters = [json.loads(line)["training_iteration"] for line in f if line.strip()]
        # a trial started again (exploit, resume) appends the rows it reports from its
        # checkpoint on, as Ray's JsonLoggerCallback does: nothing before is dropped
        assert iters[0] == 1 and iters[-1] == 30, iters
    assert pbt._num_checkpoints >= 1  # perturbation points were reached and judged
    # each exploit is logged as Ray does, and a replay of a logged trial can read it
    exp = os.path.dirname(grid[0].path)
    with open(os.path.join(exp, "pbt_global.txt")) as f:
        logged = [json.loads(line) for line in f if line.strip()]
    assert len(logged) == len(pbt.perturbations) >= 1
    policies = [n for n in os.listdir(exp) if n.startswith("pbt_policy_")]
    assert policies
    replay = PopulationBasedTrainingReplay(os.path.join(exp, policies[0]))
    assert set(replay.config) >= {"lr", "some_other_factor"}
