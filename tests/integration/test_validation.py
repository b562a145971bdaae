"""Checkpoint validation (Ray Train's ``ValidationConfig``): the validation function runs on a
committed checkpoint in a process of its own, and what it returns lands on that checkpoint."""

from __future__ import annotations

import logging
import os
import tempfile
import threading

import pytest

from tandem import train
from tandem.train import (
    Checkpoint,
    CheckpointConfig,
    DataParallelTrainer,
    RunConfig,
    ScalingConfig,
    ValidationConfig,
    ValidationTaskConfig,
)

pytestmark = pytest.mark.timeout(180)


def _validate(checkpoint, scale=1, fail_at=None):
    with open(os.path.join(checkpoint.path, "w")) as f:
        w = int(f.read())
    if w == fail_at:
        raise ValueError(f"cannot validate weight {w}")
    if w == 3:
        threading.Event().wait()  # hangs: stopped by its timeout_s
    return {"val_score": w * scale, "val_pid": os.getpid()}


def _loop(config):
    rank = train.get_context().get_world_rank()
    errors = []
    try:
        train.report({"i": -1}, validation=True)
    except ValueError as e:
        errors.append(str(e))
    specs = [True, ValidationTaskConfig(fn_kwargs={"scale": 100}), True,
             ValidationTaskConfig(timeout_s=2)]
    for i, spec in enumerate(specs):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "w"), "w") as f:
                f.write(str(i))
            # every rank reports the checkpoint (Ray takes the lowest rank's validation spec)
            train.report({"i": i, "pid": os.getpid()}, checkpoint=Checkpoint.from_directory(d),
                         validation=spec if rank == 0 else False)
    seen = [(c.metrics.get("val_score"), c.status.value)
            for c in train.get_all_reported_checkpoints()]  # VALIDATED: waits for them
    train.report({"seen": seen, "errors": errors,
                  "context": type(train.get_context()).__name__})


@pytest.mark.slow
def test_validation_metrics_land_on_their_checkpoint(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    config = ValidationConfig(fn=_validate, task_config=ValidationTaskConfig(
        fn_kwargs={"fail_at": 2}))
    result = DataParallelTrainer(
        _loop, scaling_config=ScalingConfig(num_workers=2), validation_config=config,
        run_config=RunConfig(storage_path=str(tmp_path), verbose=0,
                             checkpoint_config=CheckpointConfig(num_to_keep=10))).fit()
    # in the train function: every validation ended, each with its outcome
    assert result.metrics["seen"] == [[0, "VALIDATED"], [100, "VALIDATED"],
                                      [None, "VALIDATION_FAILED"],
                                      [None, "VALIDATION_TIMEOUT"]]
    assert result.metrics["errors"] == ["Validation requires a checkpoint to be provided."]
    assert result.metrics["context"] == "DistributedTrainContext"  # Ray's, in a worker
    # on the result: the validation metrics are merged into their checkpoint's metrics
    by_i = {m["i"]: m for _c, m in result.best_checkpoints}
    assert by_i[0]["val_score"] == 0 and by_i[1]["val_score"] == 100  # fn_kwargs merged
    assert "val_score" not in by_i[2] and "val_score" not in by_i[3]
    # run off the training workers' processes (and off the driver's)
    assert by_i[0]["val_pid"] not in (by_i[0]["pid"], os.getpid())
    # a failing validation function: its error and traceback in the log, the run goes on
    assert "Validation failed for checkpoint" in caplog.text
    assert "ValueError: cannot validate weight 2" in caplog.text
    assert "exceeded timeout_s=2" in caplog.text


def _asks_without_config(config):
    with tempfile.TemporaryDirectory() as d:
        train.report({"i": 0}, checkpoint=Checkpoint.from_directory(d), validation=True)


def test_validation_refused_without_config_and_bad_values(tmp_path):
    with pytest.raises(ValueError, match="timeout_s"):
        ValidationTaskConfig(timeout_s=0)
    with pytest.raises(ValueError, match="num_gpus.*Supported keys: max_retries"):
        ValidationConfig(fn=_validate, ray_remote_kwargs={"num_gpus": 1})
    with pytest.raises(TypeError, match="fn"):
        ValidationConfig(fn="not a function")  # type: ignore[arg-type]
    with pytest.raises(train.TrainingFailedError,
                       match="`validation_config` was not set on the trainer"):
        DataParallelTrainer(_asks_without_config,
                            run_config=RunConfig(storage_path=str(tmp_path), verbose=0)).fit()


def _report_options(config):
    import shutil

    from tandem.train import CheckpointUploadMode

    root = config["root"]

    def folder(name):
        d = os.path.join(root, name)
        os.makedirs(d)
        with open(os.path.join(d, "w"), "w") as f:
            f.write(name)
        return d

    train.report({"i": 0}, checkpoint=Checkpoint.from_directory(folder("a")),
                 checkpoint_dir_name="epoch_a")
    train.report({"i": 1}, checkpoint=Checkpoint.from_directory(folder("b")),
                 checkpoint_upload_mode=CheckpointUploadMode.ASYNC)
    train.report({"i": 2}, checkpoint=Checkpoint.from_directory(folder("c")),
                 checkpoint_upload_mode=CheckpointUploadMode.NO_UPLOAD)

    def upload(checkpoint, name):
        dest = os.path.join(root, "uploaded", name)
        shutil.copytree(checkpoint.path, dest)
        return Checkpoint.from_directory(dest)

    train.report({"i": 3}, checkpoint=Checkpoint.from_directory(folder("d")),
                 checkpoint_upload_fn=upload)


def test_report_checkpoint_options(tmp_path):
    root = tmp_path / "src"
    root.mkdir()
    result = DataParallelTrainer(
        _report_options, train_loop_config={"root": str(root)},
        run_config=RunConfig(storage_path=str(tmp_path / "runs"), name="r", verbose=0)).fit()
    paths = [c.path for c, _m in result.best_checkpoints]
    run = str(tmp_path / "runs" / "r")
    assert paths == [os.path.join(run, "epoch_a"), os.path.join(run, "checkpoint_000002"),
                     str(root / "c"), str(root / "uploaded" / "checkpoint_000004")]
    for path, name in zip(paths, "abcd"):
        assert (tmp_path / path / "w").read_text() == name
    # ASYNC deletes the reported local folder once copied (Ray's default for it); SYNC keeps
    assert not (root / "b").exists() and (root / "a").exists()


def _validate_when_let(checkpoint, gates):
    with open(os.path.join(gates, f"started_{os.getpid()}"), "w"):
        pass
    while not os.path.exists(os.path.join(gates, "go")):  # the test lets it end
        threading.Event().wait(0.05)
    with open(os.path.join(checkpoint.path, "w")) as f:
        return {"val_score": int(f.read()) * 10}


def _report_then_wait(config):
    if train.get_checkpoint() is not None:  # the resumed run: nothing more to train
        train.report({"resumed": True})
        return
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "w"), "w") as f:
            f.write("7")
        train.report({"i": 0}, checkpoint=Checkpoint.from_directory(d), validation=True)
    threading.Event().wait()  # until the test stops the run


def test_a_validation_pending_at_an_abort_runs_when_the_run_resumes(tmp_path):
    """As Ray Train's ValidationManager: a validation cancelled by the run's abort stays
    pending, and the next run with the same storage path and name runs it."""
    import time

    gates = tmp_path / "gates"
    gates.mkdir()

    def trainer():
        return DataParallelTrainer(
            _report_then_wait, scaling_config=ScalingConfig(num_workers=1),
            validation_config=ValidationConfig(fn=_validate_when_let, task_config=(
                ValidationTaskConfig(fn_kwargs={"gates": str(gates)}))),
            run_config=RunConfig(storage_path=str(tmp_path / "runs"), name="v", verbose=0))

    handle = trainer().fit(block=False)
    deadline = time.monotonic() + 120
    while not any(p.name.startswith("started_") for p in gates.iterdir()):
        assert time.monotonic() < deadline, "the validation never started"
        threading.Event().wait(0.05)
    handle.stop()  # aborts the run while the validation runs
    aborted = handle.wait()
    assert [m.get("val_score") for _c, m in aborted.best_checkpoints] == [None]

    (gates / "go").touch()
    result = trainer().fit()
    assert result.metrics.get("resumed") is True
    by_i = {m["i"]: m for _c, m in result.best_checkpoints}
    assert by_i[0]["val_score"] == 70  # the pending validation ran, and landed on it
    assert len([p for p in gates.iterdir() if p.name.startswith("started_")]) == 2
