"""docs/migration.md's Ray compatibility table is generated from the installed Ray (2.60, in
the `all` extra) and must match what tests/tools/compat_table.py produces now."""

from __future__ import annotations

import dataclasses
import importlib
import os
from typing import Any

import pytest

from tests.tools import compat_table as ct

pytestmark = pytest.mark.ray


def test_migration_table_is_up_to_date() -> None:
    """Fails with the diff (and how to regenerate) when a Ray name, a parameter, a default or
    a note changed; ``TANDEM_UPDATE_COMPAT=1`` rewrites the table instead."""
    ok, message = ct.check(write=os.environ.get("TANDEM_UPDATE_COMPAT") == "1")
    assert ok, message


def test_every_listed_ray_module_and_air_integration_is_covered() -> None:
    listed = {m for m, _ in ct.MODULES}
    for module in ("ray.train", "ray.train.torch", "ray.tune", "ray.tune.schedulers",
                   "ray.tune.search", "ray.tune.stopper", "ray.tune.logger", "ray.tune.utils",
                   "ray.tune.result", *ct.air_integration_modules()):
        assert module in listed, f"{module} is not compared with tandem"


MIRRORS = {
    "tandem.train.v2.api.config": {"ScalingConfig": "tandem.train", "RunConfig": "tandem.train",
                                   "FailureConfig": "tandem.train",
                                   "CheckpointConfig": "tandem.train",
                                   "LoggingConfig": "tandem.train"},
    "tandem.train.v2.api.context": {"TrainContext": "tandem.train",
                                    "DistributedTrainContext": "tandem.train._internal.contexts",
                                    "LocalTrainContext": "tandem.train._internal.contexts"},
    "tandem.train.v2.api.validation_config": {"ValidationConfig": "tandem.train",
                                              "ValidationFn": "tandem.train",
                                              "ValidationTaskConfig": "tandem.train"},
    "tandem.train.v2.api.data_parallel_trainer": {"DataParallelTrainer": "tandem.train"},
    "tandem.train.v2.api.exceptions": {"TrainingFailedError": "tandem.train",
                                       "WorkerGroupError": "tandem.train",
                                       "ControllerError": "tandem.train",
                                       "NCCLHangError": "tandem.train",
                                       "PreemptionError": "tandem.train"},
    "tandem.train.v2.api.preemption": {"PreemptionInfo": "tandem.train"},
    "tandem.train.v2.api.result": {"Result": "tandem.train"},
    "tandem.train.v2.api.train_fn_utils": {"report": "tandem.train", "get_context": "tandem.train",
                                           "get_checkpoint": "tandem.train",
                                           "get_dataset_shard": "tandem.train",
                                           "get_all_reported_checkpoints": "tandem.train",
                                           "get_preemption_info": "tandem.train"},
    "tandem.train.v2.api.callback": {"UserCallback": "tandem.train",
                                      "RayTrainCallback": "tandem.train.api.callback"},
    "tandem.train.v2.api.report_config": {"CheckpointUploadMode": "tandem.train",
                                          "CheckpointConsistencyMode": "tandem.train"},
    "tandem.train.v2.api.reported_checkpoint": {"ReportedCheckpoint": "tandem.train",
                                                "ReportedCheckpointStatus": "tandem.train"},
    "tandem.train.backend": {"Backend": "tandem.train", "BackendConfig": "tandem.train"},
    "tandem.tune.logger": {"TBXLoggerCallback": "tandem.tune", "LoggerCallback": "tandem.tune",
                           "pretty_print": "tandem.tune.logger",
                           "CSVLoggerCallback": "tandem.tune.logger",
                           "JsonLoggerCallback": "tandem.tune.logger"},
    "tandem.tune.search.concurrency_limiter": {"ConcurrencyLimiter": "tandem.tune.search"},
}


@pytest.mark.parametrize("module", sorted(MIRRORS))
def test_mirrored_ray_paths_reexport_the_same_objects(module: str) -> None:
    """A Ray module path (``ray.train.v2.api.config``) imports from tandem under the same
    path and gives tandem's own classes, not copies that could drift."""
    mod = importlib.import_module(module)
    assert sorted(mod.__all__) == sorted(MIRRORS[module])
    for name, home in MIRRORS[module].items():
        assert getattr(mod, name) is getattr(importlib.import_module(home), name)


def test_result_key_constants_have_rays_values() -> None:
    import ray.tune.result as ray_result

    import tandem.tune.result as ours

    for name in ours.__all__:
        assert getattr(ours, name) == getattr(ray_result, name)


# -- the generator itself: what Ray has and tandem lacks shows up ------------------------------


@dataclasses.dataclass
class _FakeTuneConfig:  # lacks num_samples and more; mode defaults differently
    mode: str | None = "max"
    metric: str | None = None
    extra_knob: int = 3


def _fake_lookup(path: str) -> tuple[bool, Any]:
    if path == "tandem.tune.stopper.Stopper":
        return False, None
    if path == "tandem.tune.TuneConfig":
        return True, _FakeTuneConfig
    return ct.resolve(path)


def test_generator_marks_missing_names_params_and_defaults() -> None:
    notes: dict[str, Any] = {"modules": {}, "params": {},
                             "names": {"ray.tune.stopper.Stopper": {"missing": "gone here",
                                                                    "note": "present"}}}
    table = ct.build(notes=notes, modules=[("ray.tune.stopper", ct.ALL)],
                     signatures=["ray.tune.TuneConfig"], lookup=_fake_lookup)
    rows = {r.name: r for r in table.names}
    assert rows["Stopper"].status == ct.MISSING and rows["Stopper"].note == "gone here"
    assert rows["TimeoutStopper"].status == ct.SAME  # looked up for real: tandem has it
    params = {r.name: r for r in table.params["ray.tune.TuneConfig"]}
    assert params["num_samples"].status == ct.MISSING
    assert params["mode"].status == ct.DIFFERS and params["mode"].tandem_default == "'max'"
    assert params["metric"].status == ct.SAME
    assert params["extra_knob"].status == ct.EXTRA
    assert "TuneConfig(num_samples)" in " ".join(table.missing_notes)
    text = ct.render(table)
    assert "| `num_samples` | `1` | `—` | missing |" in text
    assert "| `Stopper` | missing | gone here |" in text


def test_stale_notes_are_reported() -> None:
    notes: dict[str, Any] = {"modules": {}, "params": {"ray.tune.TuneConfig": {"nope": "x"}},
                             "names": {"ray.tune.stopper.NoSuchStopper": "x"}}
    table = ct.build(notes=notes, modules=[("ray.tune.stopper", ct.ALL)],
                     signatures=["ray.tune.TuneConfig"])
    assert "names: ray.tune.stopper.NoSuchStopper" in table.unused_notes
    assert "params: ray.tune.TuneConfig(nope)" in table.unused_notes


def test_splice_replaces_only_the_generated_part() -> None:
    doc = f"intro\n\n{ct.BEGIN}\nold\n{ct.END}\nafter\n"
    assert ct.splice(doc, f"{ct.BEGIN}\nnew\n{ct.END}\n") == \
        f"intro\n\n{ct.BEGIN}\nnew\n{ct.END}\nafter\n"
    assert ct.splice("intro\n", "T\n") == "intro\n\nT\n"


def _setup_mlflow_like(config=None, tracking_uri=None, registry_uri=None, experiment_id=None,
                       experiment_name=None, tracking_token=None, artifact_location=None,
                       run_name=None, create_experiment_if_not_exists=False, tags=None,
                       rank_zero_only=True):
    """Has Ray's ``setup_mlflow`` signature (as tandem's will once it lands)."""


def test_integrations_read_from_source_and_notes_switch_once_tandem_has_them() -> None:
    """Ray's MLflow module is compared from its source (importing it imports MLflow); a row
    noted as "being added" shows its ``note`` once tandem has the name."""
    notes = ct.load_notes()
    notes["names"]["ray.air.integrations.mlflow.MLflowLoggerCallback"] = {
        "missing": "Being added.", "note": "One MLflow run per trial."}

    def lookup(path: str) -> tuple[bool, Any]:
        if path == "tandem.air.integrations.mlflow.setup_mlflow":
            return True, _setup_mlflow_like
        return False, None

    table = ct.build(notes=notes, modules=[("ray.air.integrations.mlflow", ct.DEFINED)],
                     signatures=[], lookup=lookup)
    rows = {r.name: r for r in table.names}
    assert rows["setup_mlflow"].status == ct.SAME
    assert "rank 0 only" in rows["setup_mlflow"].note
    assert rows["MLflowLoggerCallback"].status == ct.MISSING
    assert "Being added" in rows["MLflowLoggerCallback"].note
