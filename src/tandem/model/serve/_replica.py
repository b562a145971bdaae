"""What one serving replica runs (a worker process of the served job): load the model once,
then answer batches from the front until told to stop.

Frames to the front: ``("ready", info)``, ``("out", batch_id, results)`` with one
``("ok", outputs)`` or ``("error", http_status, message)`` per request of the batch, and
``("fatal", message)`` when the model cannot be loaded.
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import traceback
from dataclasses import dataclass
from typing import Any


def _to_jsonable(y: Any) -> list[Any]:
    if hasattr(y, "detach"):  # a torch tensor
        y = y.detach().cpu().numpy()
    if hasattr(y, "tolist"):
        out = y.tolist()
        return out if isinstance(out, list) else [out]
    if isinstance(y, (list, tuple)):
        return [o.tolist() if hasattr(o, "tolist") else o for o in y]
    raise TypeError(f"predict returned {type(y).__name__}; a batch of outputs (a list, an "
                    f"array or a tensor with one row per input) is needed to answer requests.")


def _shape(x: Any) -> tuple[int, ...] | None:
    try:
        import numpy as np

        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - ragged or not numeric
        return None
    if a.dtype == object:
        return None
    return tuple(a.shape)


@dataclass
class ReplicaTask:
    """The cloudpickled task each replica process runs (see the module docstring)."""

    location: str
    what: str

    def _fetch(self) -> tuple[str, str | None]:
        if "://" not in self.location:
            return self.location, None
        import fsspec

        tmp = tempfile.mkdtemp(prefix="tandem-replica-")
        fs, path = fsspec.core.url_to_fs(self.location)
        fs.get(path.rstrip("/") + "/", tmp.rstrip("/") + "/", recursive=True)
        return tmp, tmp

    def __call__(self, channel: Any) -> int:
        inbox: queue.SimpleQueue = queue.SimpleQueue()
        channel.on_message(inbox.put)
        try:
            from tandem.model.registry._api import load_model_dir

            directory, tmp = self._fetch()
            try:
                model = load_model_dir(directory, self.what)
                model.ensure_setup()
            finally:
                if tmp is not None:
                    shutil.rmtree(tmp, ignore_errors=True)
            item_shape = None
            example = getattr(model, "example_input", None)
            if callable(example):
                example = example()
            if example is not None:
                shape = _shape(example)
                if shape:
                    item_shape = shape[1:]
        except BaseException as e:  # noqa: BLE001 - reported to the front, then exit
            channel.send(("fatal", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
            return 1
        channel.send(("ready", {"pid": os.getpid(), "item_shape": item_shape}))
        predict = model.predict
        while True:
            msg = inbox.get()
            if msg[0] == "stop":
                channel.closing = True
                return 0
            _, batch_id, requests = msg
            channel.send(("out", batch_id, self._answer(predict, requests, item_shape)))

    def _answer(self, predict: Any, requests: list[list[Any]],
                item_shape: tuple[int, ...] | None) -> list[tuple[Any, ...]]:
        results: list[tuple[Any, ...] | None] = [None] * len(requests)
        good: list[int] = []
        if item_shape is not None:
            for i, inputs in enumerate(requests):
                for j, x in enumerate(inputs):
                    s = _shape(x)
                    if s != item_shape:
                        given = "not a numeric array" if s is None else f"shape {list(s)}"
                        results[i] = ("error", 422, (
                            f"inputs[{j}] has {given}; the model expects each input to have "
                            f"shape {list(item_shape)} (from its example_input)."))
                        break
                else:
                    good.append(i)
        else:
            good = list(range(len(requests)))
        if good:
            flat = [x for i in good for x in requests[i]]
            try:
                outs = _to_jsonable(predict(flat))
                if len(outs) != len(flat):
                    raise ValueError(f"predict returned {len(outs)} outputs for {len(flat)} "
                                     f"inputs; it must return one output per input.")
                pos = 0
                for i in good:
                    n = len(requests[i])
                    results[i] = ("ok", outs[pos:pos + n])
                    pos += n
            except Exception:  # noqa: BLE001 - find which request is at fault
                if len(good) == 1:
                    results[good[0]] = self._error(good[0], requests)
                else:
                    for i in good:
                        try:
                            results[i] = ("ok", _to_jsonable(predict(requests[i])))
                        except Exception:  # noqa: BLE001
                            results[i] = self._error(i, requests)
        return [r if r is not None else ("error", 500, "no answer") for r in results]

    @staticmethod
    def _error(i: int, requests: list[list[Any]]) -> tuple[Any, ...]:
        import sys

        e = sys.exc_info()[1]
        shapes = sorted({str(list(s)) if (s := _shape(x)) is not None else "non-numeric"
                         for x in requests[i]})
        return ("error", 422, f"the model could not predict on these inputs (input shapes: "
                              f"{', '.join(shapes)}): {type(e).__name__}: {e}")
