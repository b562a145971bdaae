"""Which checkpoints a run keeps.

A checkpoint reported at iteration ``i`` is *committed* once every rank has reported
iteration ``i`` (each rank's report comes after its part of the checkpoint was written),
so a restart never picks a half-written checkpoint. Committed checkpoints beyond
``num_to_keep`` are deleted, worst first by the score attribute; the latest is always kept.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable
from typing import Any

from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import CheckpointConfig

logger = logging.getLogger(__name__)
_ITER = re.compile(r"checkpoint_(\d+)$")


def checkpoint_iteration(path: str) -> int | None:
    m = _ITER.search(path.rstrip("/"))
    return int(m.group(1)) if m else None


class CheckpointManager:
    def __init__(
        self,
        config: CheckpointConfig | None,
        delete: Callable[[str], None],
        owner: str | None = None,
        on_commit: Callable[[], None] | None = None,
    ) -> None:
        self.config = config or CheckpointConfig()
        self._delete = delete
        self._on_commit = on_commit  # e.g. records the committed set in the run folder
        self.owner = owner  # the run folder: only checkpoints inside it are ever deleted
        self._pending: dict[int, str] = {}
        self._pending_metrics: dict[int, dict] = {}
        self.kept: list[tuple[int, Checkpoint, dict]] = []  # oldest first
        self.latest: tuple[int, Checkpoint, dict] | None = None
        self._warned_missing = False
        # iterations whose checkpoint waits for its validation: never deleted meanwhile
        self.protected: set[int] = set()

    def seed(self, checkpoint: Checkpoint, iteration: int, metrics: dict | None = None) -> None:
        """Registers an already-committed checkpoint (resume, restore). Without ``metrics``,
        the ones reported with it are read back from its run's ``result.json``, so top-k
        ranking keeps it where it belongs instead of ranking it lowest."""
        if metrics is None:
            metrics = reported_metrics(checkpoint.path)
        entry = (iteration, checkpoint, metrics or {})
        self.kept.append(entry)
        self.latest = entry

    def on_report(self, iteration: int, path: str | None, rank0_metrics: dict | None) -> None:
        if path is not None and iteration not in self._pending:
            self._pending[iteration] = path
        if rank0_metrics is not None and iteration in self._pending:
            self._pending_metrics[iteration] = rank0_metrics

    def commit_upto(self, iteration: int) -> list[tuple[int, Checkpoint, dict]]:
        """Commits pending checkpoints up to ``iteration``; returns the new ones."""
        new = []
        for it in sorted(i for i in self._pending if i <= iteration):
            ckpt = Checkpoint(self._pending.pop(it))
            entry = (it, ckpt, self._pending_metrics.pop(it, {}))
            self.kept.append(entry)
            self.latest = entry
            new.append(entry)
        if new:
            self._enforce_limit()
            if self._on_commit is not None:
                self._on_commit()
        return new

    def validated(self, iteration: int, metrics: dict | None) -> None:
        """The validation of the checkpoint at ``iteration`` ended: its ``metrics`` (None
        when it failed or timed out) are merged into the ones reported with it (in place, so
        the run's result sees them too, as in Ray), and it may be deleted again."""
        self.protected.discard(iteration)
        for entry in self.kept:
            if entry[0] == iteration and metrics:
                entry[2].update(metrics)
        self._enforce_limit()

    def drop_pending(self) -> list[str]:
        """Forgets uncommitted checkpoints (after a failure); returns their paths."""
        paths = list(self._pending.values())
        self._pending.clear()
        self._pending_metrics.clear()
        return paths

    def _score(self, entry: tuple[int, Checkpoint, dict]) -> tuple[int, float]:
        attr = self.config.checkpoint_score_attribute
        if attr is None:
            return (1, float(entry[0]))
        value = entry[2].get(attr)
        if not isinstance(value, (int, float)):
            if not self._warned_missing:
                self._warned_missing = True
                logger.warning(
                    "CheckpointConfig(checkpoint_score_attribute=%r): the checkpoint at iteration "
                    "%d has no numeric %r in rank 0's metrics (keys: %s); it ranks lowest.",
                    attr, entry[0], attr, sorted(entry[2]),
                )
            return (0, 0.0)
        return (1, value if self.config.checkpoint_score_order == "max" else -value)

    def _enforce_limit(self) -> None:
        k = self.config.num_to_keep
        if k is None or len(self.kept) <= k:
            return
        latest = self.latest
        candidates = [e for e in self.kept if e is not latest and e[0] not in self.protected]
        candidates.sort(key=self._score)
        while len(self.kept) > k and candidates:
            worst = candidates.pop(0)
            self.kept.remove(worst)
            if not self._owns(worst[1].path):
                # e.g. a PBT donor's checkpoint this trial resumed from: another run's (or a
                # paused trial's) to keep; this run only stops counting it
                continue
            try:
                self._delete(worst[1].path)
            except OSError as e:
                logger.warning("could not delete checkpoint %s: %s", worst[1].path, e)

    def _owns(self, path: str) -> bool:
        if self.owner is None:
            return True
        root = self.owner.rstrip("/") + "/"
        if "://" in root or "://" in path:
            return path.startswith(root)
        return os.path.abspath(path).startswith(os.path.abspath(root.rstrip("/")) + os.sep)

    @property
    def best_checkpoints(self) -> list[tuple[Checkpoint, dict]]:
        return [(c, m) for _, c, m in self.kept]


def existing_checkpoints(run_path: str) -> list[tuple[int, str]]:
    """``(iteration, path)`` of checkpoint folders already in a local run folder."""
    if "://" in run_path or not os.path.isdir(run_path):
        return []
    out = []
    for name in os.listdir(run_path):
        it = checkpoint_iteration(name)
        if it is not None and os.path.isdir(os.path.join(run_path, name)):
            out.append((it, os.path.join(run_path, name)))
    return sorted(out)


def reported_metrics(checkpoint_path: str) -> dict:
    """The metrics reported with a checkpoint: the row of its run's ``result.json`` (in the
    folder holding ``checkpoint_NNNNNN``) whose ``training_iteration`` is NNNNNN. Empty when
    that cannot be found (a checkpoint from elsewhere, a URL)."""
    import json

    it = checkpoint_iteration(checkpoint_path)
    if it is None or "://" in checkpoint_path:
        return {}
    result = os.path.join(os.path.dirname(os.path.abspath(checkpoint_path.rstrip("/"))),
                          "result.json")
    found: dict = {}
    try:
        with open(result) as f:
            for line in f:
                if f'"training_iteration": {it}' not in line:
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue
                if row.get("training_iteration") == it:
                    found = row  # the last such row: the one of the lineage that kept it
    except OSError:
        return {}
    return found


def committed_checkpoints(run_path: str) -> list[tuple[int, str]] | None:
    """``(iteration, path)`` of the checkpoints a run in ``run_path`` committed (its
    ``checkpoints.json``), latest last; None when no run there recorded any."""
    import json

    if "://" in run_path:
        return None
    try:
        with open(os.path.join(run_path, "checkpoints.json")) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return None
    out = []
    for it, name in state.get("committed") or []:
        path = os.path.join(run_path, name)
        if os.path.isdir(path):
            out.append((int(it), path))
    return sorted(out) or None


def pending_validations(run_path: str) -> list[tuple[int, str, Any]]:
    """``(iteration, path, validation spec)`` of the checkpoints whose validation was still
    pending when a run in ``run_path`` ended (aborted: its ``checkpoints.json``), oldest
    first; checkpoints no longer there are left out. A run resuming it runs them again, as
    Ray Train's ``ValidationManager`` re-queues incomplete validations."""
    import base64
    import json

    import cloudpickle

    if "://" in run_path:
        return []
    try:
        with open(os.path.join(run_path, "checkpoints.json")) as f:
            state = json.load(f)
    except (OSError, ValueError):
        return []
    out = []
    for it, name, spec in state.get("pending_validation") or []:
        path = os.path.join(run_path, name)
        if os.path.isdir(path):
            out.append((int(it), path, cloudpickle.loads(base64.b64decode(spec))))
    return sorted(out, key=lambda e: e[0])


def announce_resume(run_path: str, checkpoint_path: str, given: Checkpoint | None) -> None:
    """Says on the console that ``fit()`` resumes the earlier run in ``run_path``."""
    import os.path

    ended = "failed" if os.path.exists(os.path.join(run_path, "error.txt")) else "ended or stopped"
    extra = (f" (it takes precedence over resume_from_checkpoint={given.path!r}, as in Ray "
             f"Train)") if given is not None else ""
    logger.warning(
        "%s already holds a run (%s): resuming it from its latest committed checkpoint %s%s. "
        "To start afresh, give RunConfig(name=...) a new name or delete that folder.",
        run_path, ended, os.path.basename(checkpoint_path.rstrip("/")), extra,
    )
