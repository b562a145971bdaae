"""``tandem.tune.utils``: the helpers of ``ray.tune.utils``, with Ray's behaviour.

``mock_trainable`` holds the ``MyTrainableClass`` that Ray's examples tune.

- ``deep_update``, ``merge_dicts``, ``flatten_dict``, ``unflattened_lookup``, ``date_str``:
  dict and naming helpers.
- ``validate_save_restore(trainable_cls, config)``: checks that a ``Trainable`` class
  resumes correctly (three steps, save, restore into a fresh instance in another process,
  two more steps: iterations 4 and 5).
- ``diagnose_serialization(trainable)``: True when the trainable pickles, else the names of
  the globals / nonlocals it captures that do not.
- ``wait_for_gpu(...)``: blocks until the GPU's memory use falls below a target (NVML).
- ``UtilMonitor``: a thread sampling CPU / RAM (psutil) and GPU (NVML) use.
- ``warn_if_slow(name)``: a context manager that logs when its block took too long.
"""

from __future__ import annotations

import copy
import inspect
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

import cloudpickle

from tandem._core.extras import install_command

if TYPE_CHECKING:
    from typing_extensions import Self

logger = logging.getLogger(__name__)

__all__ = [
    "UtilMonitor",
    "_detect_config_single",
    "date_str",
    "deep_update",
    "diagnose_serialization",
    "flatten_dict",
    "merge_dicts",
    "unflattened_lookup",
    "validate_save_restore",
    "wait_for_gpu",
    "warn_if_slow",
]


def date_str() -> str:
    """The current time as ``YYYY-MM-DD_HH-MM-SS`` (how trial folders are stamped)."""
    return datetime.today().strftime("%Y-%m-%d_%H-%M-%S")  # noqa: DTZ002 - local time, as Ray


def merge_dicts(d1: dict[str, Any], d2: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``d1`` updated recursively with ``d2`` (new keys allowed)."""
    merged = copy.deepcopy(d1)
    deep_update(merged, d2, True, [])
    return merged


def deep_update(
    original: dict[str, Any],
    new_dict: dict[str, Any],
    new_keys_allowed: bool = False,
    allow_new_subkey_list: list[str] | None = None,
    override_all_if_type_changes: list[str] | None = None,
    override_all_key_list: list[str] | None = None,
) -> dict[str, Any]:
    """Updates ``original`` with ``new_dict`` recursively, in place, and returns it.

    Args:
        original: The dict to update.
        new_dict: The values to put into it.
        new_keys_allowed: Whether keys absent from ``original`` may be added (else
            ``ValueError("Unknown config parameter `k`")``; Ray raises a bare Exception).
        allow_new_subkey_list: Keys whose sub-dicts may take new keys.
        override_all_if_type_changes: Keys whose sub-dict is replaced whole when its
            ``"type"`` changes.
        override_all_key_list: Keys whose value is replaced whole.
    """
    allow_new_subkey_list = allow_new_subkey_list or []
    override_all_if_type_changes = override_all_if_type_changes or []
    override_all_key_list = override_all_key_list or []
    for k, value in new_dict.items():
        if k not in original and not new_keys_allowed:
            raise ValueError(f"Unknown config parameter `{k}` ")
        if isinstance(original.get(k), dict) and isinstance(value, dict):
            if (k in override_all_if_type_changes and "type" in value
                    and "type" in original[k] and value["type"] != original[k]["type"]) or k in override_all_key_list:
                original[k] = value
            elif k in allow_new_subkey_list:
                deep_update(original[k], value, True)
            else:
                deep_update(original[k], value, new_keys_allowed)
        else:
            original[k] = value
    return original


def flatten_dict(dt: dict[str, Any], delimiter: str = "/", prevent_delimiter: bool = False,
                 flatten_list: bool = False) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` → ``{"a/b": 1}``. With ``flatten_list``, lists and tuples of
    dicts are flattened too (``"a/0/b"``); with ``prevent_delimiter``, a key that holds the
    delimiter raises ``ValueError``."""

    def check(key: object) -> None:
        if prevent_delimiter and delimiter in str(key):
            raise ValueError(f"Found delimiter `{delimiter}` in key when trying to flatten "
                             f"array. Please avoid using the delimiter in your specification.")

    def is_list_of_dicts(v: object) -> bool:
        return flatten_list and isinstance(v, (list, tuple)) and len(v) > 0 and all(
            isinstance(x, dict) for x in v)

    dt = copy.copy(dt)
    if is_list_of_dicts(dt):
        dt = {str(i): v for i, v in enumerate(dt)}
    while any(isinstance(v, dict) or is_list_of_dicts(v) for v in dt.values()):
        remove = []
        add: dict[str, Any] = {}
        for key, value in dt.items():
            if isinstance(value, dict):
                for subkey, v in value.items():
                    check(subkey)
                    add[delimiter.join([str(key), str(subkey)])] = v
                remove.append(key)
            elif is_list_of_dicts(value):
                for i, v in enumerate(value):
                    add[delimiter.join([str(key), str(i)])] = v
                remove.append(key)
        dt.update(add)
        for k in remove:
            del dt[k]
    return dt


def unflattened_lookup(flat_key: str, lookup: Mapping | Sequence, delimiter: str = "/",
                       **kwargs: Any) -> Mapping | Sequence:
    """``lookup["a"]["b"]`` for ``flat_key="a/b"`` (list indices as numbers). With a
    ``default=`` keyword, that value is returned when a key is missing (else ``KeyError``,
    ``IndexError`` or ``TypeError``)."""
    current: Any = lookup
    for key in flat_key.split(delimiter):
        try:
            if isinstance(current, Mapping):
                current = current[key]
            elif isinstance(current, Sequence) and not isinstance(current, str):
                current = current[int(key)]
            else:
                raise TypeError(f"Cannot look up {key!r} in {type(current).__name__}")
        except (KeyError, IndexError, TypeError, ValueError):
            if "default" in kwargs:
                return kwargs["default"]
            raise
    return current


def _detect_config_single(func: Callable[..., object]) -> bool:
    """Whether ``func({})`` binds (the function takes a config argument)."""
    try:
        inspect.signature(func).bind({})
    except Exception as e:  # noqa: BLE001 - any failure to bind means "no"
        logger.debug(str(e))
        return False
    return True


class warn_if_slow:
    """``with warn_if_slow("name"):`` logs a warning when the block took longer than
    ``threshold`` seconds (default 0.5, or ``TUNE_WARN_THRESHOLD_S``)."""

    DEFAULT_THRESHOLD = float(os.environ.get("TUNE_WARN_THRESHOLD_S", "0.5"))
    DEFAULT_MESSAGE = ("The `{name}` operation took {duration:.3f} s, which may be a "
                       "performance bottleneck.")

    def __init__(self, name: str, threshold: float | None = None, message: str | None = None,
                 disable: bool = False) -> None:
        self.name = name
        self.threshold = threshold or self.DEFAULT_THRESHOLD
        self.message = message or self.DEFAULT_MESSAGE
        self.too_slow = False
        self.disable = disable
        self.start = 0.0

    def __enter__(self) -> Self:
        self.start = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        now = time.monotonic()
        if self.disable:
            return
        if now - self.start > self.threshold and now - self.start > 0.1:
            self.too_slow = True
            logger.warning(self.message.format(name=self.name, duration=now - self.start))


class UtilMonitor(threading.Thread):
    """Samples this machine's CPU and RAM use (psutil) and each GPU's load and memory use
    (NVML, where a GPU exists) every ``delay`` seconds in a daemon thread.
    ``get_data()`` returns the means since the last call (``perf/cpu_util_percent``,
    ``perf/ram_util_percent``, ``perf/gpu_util_percent0``, ``perf/vram_util_percent0``, ...)
    and clears them."""

    def __init__(self, start: bool = True, delay: float = 0.7) -> None:
        super().__init__(daemon=True)
        self.stopped = True
        self.delay = delay
        self.values: dict[str, list[float]] = defaultdict(list)
        self.lock = threading.Lock()
        try:
            import psutil

            self._psutil: Any = psutil
        except ImportError:
            self._psutil = None
            logger.warning("Install psutil to monitor system performance.")
        self._nvml = _nvml()
        if start and (self._psutil is not None or self._nvml is not None):
            self.start()

    def _read(self) -> None:
        with self.lock:
            if self._psutil is not None:
                self.values["cpu_util_percent"].append(
                    float(self._psutil.cpu_percent(interval=None)))
                self.values["ram_util_percent"].append(
                    float(self._psutil.virtual_memory().percent))
            if self._nvml is not None:
                for i, (load, mem) in enumerate(_gpu_stats(self._nvml)):
                    self.values["gpu_util_percent" + str(i)].append(load)
                    self.values["vram_util_percent" + str(i)].append(mem)

    def get_data(self) -> dict[str, float]:
        if self.stopped:
            return {}
        with self.lock:
            out = {"perf/" + k: sum(v) / len(v) for k, v in self.values.items() if v}
            self.values.clear()
        return out

    def run(self) -> None:
        self.stopped = False
        while not self.stopped:
            self._read()
            time.sleep(self.delay)

    def stop(self) -> None:
        self.stopped = True


def _nvml() -> ModuleType | None:
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:  # noqa: BLE001 - no library or no driver: no GPU to watch
        return None


def _gpu_stats(nvml: ModuleType) -> list[tuple[float, float]]:
    """(load, memory used fraction) of each GPU, both in [0, 1]."""
    out = []
    for i in range(nvml.nvmlDeviceGetCount()):
        handle = nvml.nvmlDeviceGetHandleByIndex(i)
        util = nvml.nvmlDeviceGetUtilizationRates(handle)
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        out.append((util.gpu / 100.0, mem.used / mem.total if mem.total else 0.0))
    return out


def wait_for_gpu(gpu_id: int | str | None = None, target_util: float = 0.01, retry: int = 20,
                 delay_s: int = 5, gpu_memory_limit: float | None = None) -> bool:
    """Blocks until the memory use of GPU ``gpu_id`` (default: this trial's first GPU, from
    ``CUDA_VISIBLE_DEVICES``) is at most ``target_util`` (a fraction), checking ``retry``
    times ``delay_s`` seconds apart. Returns True once it is.

    Raises:
        RuntimeError: no GPU can be read (no NVML / driver, or no GPU assigned), or the GPU
            stayed busy for every retry.
    """
    if gpu_memory_limit:
        raise ValueError("'gpu_memory_limit' is deprecated. Use 'target_util' instead.")
    nvml = _nvml()
    if nvml is None:
        raise RuntimeError(
            "wait_for_gpu() needs an NVIDIA GPU with its driver and the pynvml package "
            f"({install_command('server')}); none is available on this machine. Give the trial "
            "a GPU (tune.with_resources(fn, {'gpu': 1})) on a machine that has one."
        )
    if gpu_id is None:
        visible = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g]
        if not visible:
            raise RuntimeError(
                "wait_for_gpu(): no GPU ids found in CUDA_VISIBLE_DEVICES. Did you set Tune "
                "resources correctly (tune.with_resources(fn, {'gpu': 1}))?"
            )
        gpu_id = visible[0]
    if isinstance(gpu_id, str) and gpu_id.isdigit():
        gpu_id = int(gpu_id)
    elif not isinstance(gpu_id, (int, str)):
        raise ValueError(f"gpu_id ({type(gpu_id)}) must be type str/int.")
    if isinstance(gpu_id, int):
        handle = nvml.nvmlDeviceGetHandleByIndex(gpu_id)
    else:
        handle = nvml.nvmlDeviceGetHandleByUUID(gpu_id)
    for i in range(int(retry)):
        mem = nvml.nvmlDeviceGetMemoryInfo(handle)
        used = mem.used / mem.total if mem.total else 0.0
        if used <= target_util:
            return True
        logger.info("Waiting for GPU util to reach %s. Util: %.3f", target_util, used)
        if i < retry - 1:
            time.sleep(delay_s)
    raise RuntimeError("GPU memory was not freed.")


def _save_restore_child() -> None:
    """In a fresh process (``python -c``): read ``(cls, config, checkpoint_dir)`` from stdin,
    restore into a new instance, train twice, write the two results to stdout."""
    import sys

    cls, config, checkpoint_dir = cloudpickle.loads(sys.stdin.buffer.read())
    trainable = cls(config=config)
    trainable.restore(checkpoint_dir)
    results = [trainable.train(), trainable.train()]
    trainable.stop()
    sys.stdout.buffer.write(cloudpickle.dumps(results))


def validate_save_restore(trainable_cls: type, config: dict[str, Any] | None = None,
                          num_gpus: int = 0) -> bool:
    """Checks that a ``Trainable`` class resumes correctly, as Ray's helper does: one
    instance trains three steps and saves; a second instance, in another process, restores
    the checkpoint and must then report ``training_iteration`` 4 and 5.

    Raises:
        AssertionError: the class does not report ``training_iteration`` or does not resume
            from its checkpoint.
        ValueError: ``num_gpus`` asks for a GPU this machine does not have.
    """
    import shutil
    import tempfile

    from tandem.tune.result import TRAINING_ITERATION
    from tandem.tune.trainable import is_trainable_class

    if not is_trainable_class(trainable_cls):
        raise TypeError(f"validate_save_restore() takes a tune.Trainable subclass, got "
                        f"{trainable_cls!r}.")
    if num_gpus:
        import torch

        if torch.cuda.device_count() < num_gpus:
            raise ValueError(f"validate_save_restore(num_gpus={num_gpus}): this machine has "
                             f"{torch.cuda.device_count()} GPUs. Pass num_gpus=0.")
    trainable_1 = trainable_cls(config=config)
    res: dict = {}
    for _ in range(3):
        res = trainable_1.train()
    assert res.get(TRAINING_ITERATION), (
        "Validation will not pass because it requires `training_iteration` to be returned.")
    checkpoint_dir = trainable_1.save(tempfile.mkdtemp(prefix="tandem-validate-"))
    try:
        import subprocess
        import sys

        proc = subprocess.run(
            [sys.executable, "-c",
             "from tandem.tune.utils import _save_restore_child; _save_restore_child()"],
            input=cloudpickle.dumps((trainable_cls, config, checkpoint_dir)),
            capture_output=True, check=False)
        if proc.returncode != 0:
            raise AssertionError(f"{trainable_cls.__name__} failed to restore in a new "
                                 f"process:\n{proc.stderr.decode(errors='replace')[-2000:]}")
        value = cloudpickle.loads(proc.stdout)
        assert value[0][TRAINING_ITERATION] == 4
        assert value[1][TRAINING_ITERATION] == 5
    finally:
        trainable_1.stop()
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
    return True


def diagnose_serialization(trainable: Callable[..., object]) -> bool | set[str]:
    """True when ``trainable`` pickles (cloudpickle, as tandem ships it to workers); else
    prints each captured global / nonlocal variable with PASSED or FAILED and returns the
    names of those that fail."""

    def check_variables(objects: Mapping[str, object], failure_set: set[str],
                        printer: Callable[[str], None]) -> None:
        for var_name, variable in objects.items():
            msg = None
            try:
                cloudpickle.dumps(variable)
                status = "PASSED"
            except Exception as e:  # noqa: BLE001
                status = "FAILED"
                msg = f"{e.__class__.__name__}: {e!s}"
                failure_set.add(var_name)
            printer(f"{variable!s}[name='{var_name}'']... {status}")
            if msg:
                printer(msg)

    print(f"Trying to serialize {trainable}...")
    try:
        cloudpickle.dumps(trainable)
        print("Serialization succeeded!")
        return True
    except Exception as e:  # noqa: BLE001
        print(f"Serialization failed: {e}")
    print(f"Inspecting the scope of the trainable by running "
          f"`inspect.getclosurevars({trainable!s})`...")
    closure = inspect.getclosurevars(trainable)
    failure_set: set[str] = set()
    if closure.globals:
        print(f"Detected {len(closure.globals)} global variables. Checking serializability...")
        check_variables(closure.globals, failure_set, lambda s: print("   " + s))
    if closure.nonlocals:
        print(f"Detected {len(closure.nonlocals)} nonlocal variables. Checking "
              f"serializability...")
        check_variables(closure.nonlocals, failure_set, lambda s: print("   " + s))
    if not failure_set:
        print("Nothing was found to have failed the diagnostic test, though serialization "
              "did not succeed. Feel free to raise an issue on github.")
        return failure_set
    print(f"Variable(s) {failure_set} was found to be non-serializable. Consider either "
          f"removing the instantiation/imports of these variables or moving the "
          f"instantiation into the scope of the function/class.")
    return failure_set
