"""Reads W&B offline runs back from disk, for tests.

wandb 0.31 ships no Python reader for its ``.wandb`` run files (the old
``wandb.sdk.internal.datastore`` is gone; the Go core writes them). The file is W&B's
7-byte header (``:W&B``, magic, version) then a LevelDB-log record stream (32 KiB blocks,
each record a 7-byte header: CRC, length, type FULL/FIRST/MIDDLE/LAST) of
``wandb_internal_pb2.Record`` protobufs, which wandb does ship.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

_BLOCK = 32768
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _payloads(path: str) -> Iterator[bytes]:
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b":W&B":
        raise ValueError(f"{path} is not a W&B run file (starts {data[:7]!r})")
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < 7:  # a block's tail too short for a header is padding
            pos += left
            continue
        length = int.from_bytes(data[pos + 4:pos + 6], "little")
        kind = data[pos + 6]
        if kind == 0:  # zero padding up to the block's end
            pos += left
            continue
        chunk = data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""


def _key(item: Any) -> str:
    return item.key or "/".join(item.nested_key)


@dataclass
class OfflineRun:
    """What one offline run recorded."""

    path: str
    run_id: str = ""
    name: str = ""
    project: str = ""
    group: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int | None = None
    artifacts: list[str] = field(default_factory=list)  # names of logged artifacts

    def metric(self, key: str) -> list[tuple[int, Any]]:
        """``(step, value)`` of every history row holding ``key``."""
        return [(row["_step"], row[key]) for row in self.history if key in row]


def read_run(path: str) -> OfflineRun:
    """Reads one ``run-<id>.wandb`` file."""
    from wandb.proto import wandb_internal_pb2 as pb

    run = OfflineRun(path)
    for payload in _payloads(path):
        rec = pb.Record()
        rec.ParseFromString(payload)
        kind = rec.WhichOneof("record_type")
        if kind == "run":
            run.run_id, run.name = rec.run.run_id, rec.run.display_name
            run.project, run.group = rec.run.project, rec.run.run_group
            for item in rec.run.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "config":
            for item in rec.config.update:
                run.config[_key(item)] = json.loads(item.value_json)
        elif kind == "history":
            run.history.append({_key(i): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "artifact":
            run.artifacts.append(rec.artifact.name)
        elif kind == "exit":
            run.exit_code = rec.exit.exit_code
    run.config.pop("_wandb", None)
    return run


def offline_runs(root: str) -> list[OfflineRun]:
    """Every offline run under ``root`` (``**/wandb/offline-run-*/run-*.wandb``; the
    ``latest-run`` links are skipped), oldest first."""
    files = [f for f in glob.glob(os.path.join(root, "**", "offline-run-*", "run-*.wandb"),
                                  recursive=True)]
    return [read_run(f) for f in sorted(files, key=os.path.getmtime)]
