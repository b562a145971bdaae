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

# What a replica needs to load its model, imported with this module, so the process replicas
# fork from has them (its preload names this module): the model base classes and the
# registry's loader; never the training code, SQL or the HTTP front.
from tandem.model._model import Model
from tandem.model.registry._api import load_model_dir

#: What a replica knows of its model once loaded: the model, the shape of one input, whether
#: inputs are numbers and of which dtype kind (from its ``example_input``).
Loaded = tuple["Model", "tuple[int, ...] | None", bool, "str | None"]


def _to_jsonable(y: object) -> list[object]:
    if hasattr(y, "detach"):  # a torch tensor
        y = y.detach().cpu().numpy()
    if hasattr(y, "tolist"):
        out = y.tolist()
        return out if isinstance(out, list) else [out]
    if isinstance(y, (list, tuple)):
        return [o.tolist() if hasattr(o, "tolist") else o for o in y]
    raise TypeError(f"predict returned {type(y).__name__}; a batch of outputs (a list, an "
                    f"array or a tensor with one row per input) is needed to answer requests.")


def _shape(x: object, numeric: bool = False) -> tuple[int, ...] | None:
    """The array shape of ``x``; None if it is ragged (or, with ``numeric``, not numbers)."""
    try:
        import numpy as np

        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - ragged or not numeric
        return None
    if a.dtype == object or (numeric and a.dtype.kind not in "biuf"):
        return None
    return tuple(a.shape)


def _is_numeric(x: object) -> bool:
    try:
        import numpy as np

        return np.asarray(x).dtype.kind in "biuf"
    except Exception:  # noqa: BLE001
        return False


def _dtype_kind(x: object) -> str | None:
    try:
        import numpy as np

        return str(np.asarray(x).dtype.kind)
    except Exception:  # noqa: BLE001
        return None


# What JSON numbers an input of the model's dtype may be: a float model takes whole and
# fractional numbers, an integer model whole numbers only.
_ACCEPTS = {"f": "iuf", "c": "iuf", "i": "iu", "u": "iu", "b": "iu"}
_KIND_NAME = {"f": "numbers", "c": "numbers", "i": "whole numbers", "u": "whole numbers",
              "b": "0 or 1"}


def _check_input(x: object, item_shape: tuple[int, ...] | None, kind: str | None) -> str | None:
    """Why one input does not fit the model (None when it does): not an array of numbers,
    a number of the wrong kind, not finite (1e999 reads as infinity), the wrong shape."""
    import numpy as np

    try:
        a = np.asarray(x)
    except Exception:  # noqa: BLE001 - ragged
        return "is not an array of numbers"
    if a.dtype.kind not in "iuf":
        return "is not an array of numbers"
    if kind is not None and a.dtype.kind not in _ACCEPTS.get(kind, "iuf"):
        return f"holds numbers that are not {_KIND_NAME.get(kind, 'numbers')} (the model's dtype)"
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        return "holds a number too large to be finite"
    if item_shape is not None and tuple(a.shape) != item_shape:
        return f"has shape {list(a.shape)}"
    return None


#: The model a replica process loaded last, kept for the next deployment of the same
#: version when the process goes back to the warm pool (``keep``): (location, what) ->
#: (model, item_shape, numeric, kind). One entry: a process serves one model at a time.
_LOADED: dict[tuple[str, str], Loaded] = {}


def _to_gpu(model: object, gpus: float) -> str:
    """Moves a ``TorchModel``'s modules to the replica's GPU (its ``CUDA_VISIBLE_DEVICES``);
    other models are left where they are. Returns the model's device."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    to = getattr(model, "modules", None)
    if gpus <= 0 or not callable(to) or not hasattr(model, "device"):
        device = getattr(model, "device", None)
        return str(device) if device is not None else "cpu"
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(
            f"this replica holds GPU(s) CUDA_VISIBLE_DEVICES={visible!r} but torch cannot use "
            f"CUDA here (torch {torch.__version__}, cuda {torch.version.cuda}); install a "
            f"CUDA build of torch, or serve on CPU (leave num_gpus unset).")
    device = torch.device("cuda", 0)
    for module in to().values():
        module.to(device)
    model.device = device  # a TorchModel (checked above)
    return str(device)


@dataclass
class ReplicaTask:
    """The cloudpickled task each replica process runs (see the module docstring)."""

    location: str
    what: str
    keep: bool = False  # keep the loaded model for the next deployment of this version
    gpus: float = 0.0  # GPUs this replica holds (its CUDA_VISIBLE_DEVICES)

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
        key = (self.location, self.what)
        cached = _LOADED.get(key) if self.keep else None
        _LOADED.clear()  # one model per process: a reused process drops another's
        try:
            if cached is not None:
                model, item_shape, numeric, kind = cached
            else:
                model, item_shape, numeric, kind = self._load()
            device = _to_gpu(model, self.gpus)
        except BaseException as e:  # noqa: BLE001 - reported to the front, then exit
            channel.send(("fatal", f"{type(e).__name__}: {e}\n{traceback.format_exc()}"))
            return 1
        if self.keep:
            _LOADED[key] = (model, item_shape, numeric, kind)
        channel.send(("ready", {"pid": os.getpid(), "item_shape": item_shape,
                                "device": device, "reused": cached is not None}))
        predict = model.predict
        while True:
            msg = inbox.get()
            if msg[0] == "stop":
                channel.closing = True
                return 0
            _, batch_id, requests, *more = msg
            offsets = more[0] if more else None
            channel.send(("out", batch_id,
                          self._answer(predict, requests, item_shape, numeric, kind,
                                       offsets)))

    def _load(self) -> Loaded:
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
        numeric = False
        kind = None
        if example is not None:
            shape = _shape(example)
            numeric = _is_numeric(example)
            kind = _dtype_kind(example) if numeric else None
            if shape:
                item_shape = shape[1:]
        return model, item_shape, numeric, kind

    def _answer(self, predict: Any, requests: list[list[Any]],
                item_shape: tuple[int, ...] | None, numeric: bool = False,
                kind: str | None = None, offsets: list[int] | None = None
                ) -> list[tuple[object, ...]]:
        results: list[tuple[Any, ...] | None] = [None] * len(requests)
        good: list[int] = []
        if item_shape is not None or numeric:
            expect = (f"each input to have shape {list(item_shape)}" if item_shape is not None
                      else "numbers")
            for i, inputs in enumerate(requests):
                for j, x in enumerate(inputs):
                    why = _check_input(x, item_shape, kind)
                    if why is not None:
                        at = j + (offsets[i] if offsets else 0)
                        results[i] = ("error", 422, (
                            f"inputs[{at}] {why}; the model expects {expect} "
                            f"(finite {_KIND_NAME.get(kind or 'f', 'numbers')}, from its "
                            f"example_input)."))
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
    def _error(i: int, requests: list[list[object]]) -> tuple[object, ...]:
        import sys

        e = sys.exc_info()[1]
        shapes = sorted({str(list(s)) if (s := _shape(x)) is not None else "non-numeric"
                         for x in requests[i]})
        message = (f"the model could not predict on these inputs (input shapes: "
                   f"{', '.join(shapes)}): {type(e).__name__}: {e}")
        return ("error", 422, message)
