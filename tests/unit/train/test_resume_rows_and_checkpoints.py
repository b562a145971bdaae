"""Resumed runs: each training_iteration is kept once, and a run deletes only its own
checkpoints, ranking a resume checkpoint by the metrics it was reported with (issue 17,
items 3 and 4)."""

from __future__ import annotations

import csv
import json
import os

from tandem.train import Checkpoint, CheckpointConfig
from tandem.train._internal.checkpoints import CheckpointManager, reported_metrics
from tandem.train._internal.storage import RunStorage


def _iterations(run: str) -> tuple[list[int], list[int]]:
    with open(os.path.join(run, "result.json")) as f:
        js = [json.loads(line)["training_iteration"] for line in f if line.strip()]
    with open(os.path.join(run, "progress.csv"), newline="") as f:
        cs = [int(r["training_iteration"]) for r in csv.DictReader(f)]
    return js, cs


def test_rewind_drops_rows_after_the_resume_iteration(tmp_path):
    run = str(tmp_path / "run")
    s = RunStorage(run)
    s.append([{"loss": 1.0 / i, "training_iteration": i} for i in range(1, 9)])
    assert s.rewind(5) == 3
    s.append([{"loss": 0.1, "training_iteration": i} for i in range(6, 8)])
    s.close()
    assert _iterations(run) == ([1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 5, 6, 7])


def test_rewind_to_zero_restarts_the_count(tmp_path):
    run = str(tmp_path / "run")
    s = RunStorage(run)
    s.append([{"x": i, "training_iteration": i} for i in range(1, 4)])
    s.rewind(0)
    s.append([{"x": 9, "training_iteration": 1}])
    s.close()
    assert _iterations(run) == ([1], [1])


def _ckpt(run: str, it: int) -> str:
    path = os.path.join(run, f"checkpoint_{it:06d}")
    os.makedirs(path)
    return path


def test_a_resume_checkpoint_keeps_its_metrics_for_top_k(tmp_path):
    donor = str(tmp_path / "donor")
    os.makedirs(donor)
    with open(os.path.join(donor, "result.json"), "w") as f:
        f.writelines(json.dumps({"acc": i / 10, "training_iteration": i}) + "\n"
                     for i in range(1, 6))
    path = _ckpt(donor, 5)
    assert reported_metrics(path)["acc"] == 0.5
    own = str(tmp_path / "own")
    deleted: list[str] = []
    m = CheckpointManager(CheckpointConfig(num_to_keep=2, checkpoint_score_attribute="acc"),
                          deleted.append, owner=own)
    m.seed(Checkpoint(path), 5)
    assert m.kept[0][2]["acc"] == 0.5
    for it, acc in ((6, 0.1), (7, 0.2)):
        m.on_report(it, _ckpt(own, it), {"acc": acc})
        m.commit_upto(it)
    # the seeded donor checkpoint (acc 0.5) outranks iteration 6 (acc 0.1): 6 goes
    assert deleted == [os.path.join(own, "checkpoint_000006")]


def test_a_run_never_deletes_a_checkpoint_outside_its_folder(tmp_path):
    donor = str(tmp_path / "donor")
    path = _ckpt(donor, 3)  # no result.json: no metrics, so it ranks lowest
    own = str(tmp_path / "own")
    deleted: list[str] = []
    m = CheckpointManager(CheckpointConfig(num_to_keep=1, checkpoint_score_attribute="acc"),
                          deleted.append, owner=own)
    m.seed(Checkpoint(path), 3)
    m.on_report(4, _ckpt(own, 4), {"acc": 1.0})
    m.commit_upto(4)
    assert deleted == []  # the donor's is only forgotten, not deleted
    assert [e[0] for e in m.kept] == [4]
    assert os.path.isdir(path)
