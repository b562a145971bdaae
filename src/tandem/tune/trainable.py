"""Trainables: the class API, and the wrappers ``with_parameters`` / ``with_resources``.

Every trainable runs as a train job of its own; a ``Trainable`` class runs in a
function that calls ``step()`` and reports each result, checkpointing every
``CheckpointConfig(checkpoint_frequency=N)`` steps and at the end if asked.
"""

from __future__ import annotations

import copy
import inspect
import json
import numbers
import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeAlias, TypeGuard

import cloudpickle

from tandem._core.errors import ConfigError
from tandem.train import session as train_session
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.context import StorageContext
from tandem.tune.result import SHOULD_CHECKPOINT

if TYPE_CHECKING:
    from tandem.train.api.config import ScalingConfig
    from tandem.tune.execution.placement_groups import PlacementGroupFactory

TrialResources: TypeAlias = "Mapping[str, float] | ScalingConfig | PlacementGroupFactory"
"""A trial's resources: a bundle such as ``{"CPU": 2}``, a gang of workers, or a factory."""

_DICT_FILE = ".tune_checkpoint.pkl"
_PATH_FILE = ".tune_checkpoint_path"
_META_FILE = ".tune_metadata.json"


class Trainable:
    """Subclass and define ``setup(config)``, ``step() -> dict`` and, to checkpoint,
    ``save_checkpoint(checkpoint_dir)`` and ``load_checkpoint(checkpoint)``.

    The older names ``_setup``, ``_train``, ``_save``, ``_restore``, ``_stop`` work too.
    ``save_checkpoint`` may write files into ``checkpoint_dir`` and return None (then
    ``load_checkpoint`` gets the directory's path), return a dict (``load_checkpoint``
    gets the dict back), or return a path inside the directory (it gets that path back).
    A result with ``"done": True`` ends the trial.
    """

    def __init__(self, config: dict[str, Any] | None = None,
                 storage: StorageContext | None = None, **kwargs: object) -> None:
        """``storage`` (Ray's): where this trainable's files go when it is built by hand
        (``self.logdir`` is its ``run_path``); in a trial, the trial's folder. Other keyword
        arguments go to ``setup`` (``tune.with_parameters``)."""
        self.config = dict(config or {})
        self._iteration = 0
        ctx = train_session.get_context()
        self._trial_id = ctx.trial_id
        self._trial_name = ctx.trial_name
        self._logdir = ctx.trial_dir
        if storage is not None:
            if not isinstance(storage, StorageContext):
                raise ConfigError(
                    f"{type(self).__name__}(storage={storage!r}): pass a "
                    f"tandem.train.StorageContext(storage_path=..., run_name=...) or None."
                )
            if self._logdir is None:
                self._logdir = storage.run_path
        self.setup(copy.deepcopy(self.config), **kwargs)

    # -- the user's methods (current names delegate to the older ones if defined) ---------
    def setup(self, config: dict[str, Any], **kwargs: object) -> None:
        legacy = getattr(type(self), "_setup", None)
        if legacy is not None:
            legacy(self, config, **kwargs)

    def step(self) -> dict[str, Any]:
        legacy = getattr(type(self), "_train", None)
        if legacy is None:
            raise NotImplementedError(
                f"{type(self).__name__} must define step() (or the older _train()), returning "
                f"a dict of metrics."
            )
        return legacy(self)

    def save_checkpoint(self, checkpoint_dir: str) -> Mapping[str, object] | str | None:
        legacy = getattr(type(self), "_save", None)
        if legacy is None:
            raise NotImplementedError(
                f"{type(self).__name__} was asked for a checkpoint but defines neither "
                f"save_checkpoint(checkpoint_dir) nor _save(checkpoint_dir)."
            )
        return legacy(self, checkpoint_dir)

    def load_checkpoint(self, checkpoint: Any) -> None:
        legacy = getattr(type(self), "_restore", None)
        if legacy is None:
            raise NotImplementedError(
                f"{type(self).__name__} must define load_checkpoint(checkpoint) (or "
                f"_restore) to resume from a checkpoint."
            )
        legacy(self, checkpoint)

    def cleanup(self) -> None:
        legacy = getattr(type(self), "_stop", None)
        if legacy is not None:
            legacy(self)

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        return False

    @classmethod
    def default_resource_request(cls, config: dict[str, Any]) -> TrialResources | None:
        """The resources a trial of this class needs for ``config`` (Ray's hook): a dict
        such as ``{"CPU": 2}``, a ``tune.PlacementGroupFactory``, or None for one CPU.
        ``tune.with_resources`` overrides it."""
        return None

    @property
    def trial_resources(self) -> PlacementGroupFactory | None:
        """The resources this trial holds, as a ``tune.PlacementGroupFactory`` (they change
        under ``ResourceChangingScheduler``)."""
        from tandem.tune.session import get_context

        return get_context().get_trial_resources()

    # -- properties the older API exposed -----------------------------------------------
    @property
    def iteration(self) -> int:
        return self._iteration

    training_iteration = iteration

    @property
    def trial_id(self) -> str | None:
        return self._trial_id

    @property
    def trial_name(self) -> str | None:
        return self._trial_name

    @property
    def logdir(self) -> str | None:
        return self._logdir

    # -- driving it (called by tandem, in the trial's worker) ---------------------------
    def train(self) -> dict[str, Any]:
        """One ``step()``, with Ray's auto-filled keys (``Trainable.train`` called
        directly): ``done`` (False unless given), ``training_iteration``,
        ``time_this_iter_s`` (unless given), ``time_total_s``, ``trial_id``, ``date``,
        ``timestamp``, ``pid``, ``hostname``, ``node_ip``, ``config``,
        ``time_since_restore``, ``iterations_since_restore`` and, when the step reports
        ``timesteps_this_iter`` / ``episodes_this_iter``, their totals. (As a trial, the
        run fills the row's keys itself.)"""
        import datetime
        import platform
        import socket
        import time

        start = time.time()
        result = self._train_step()
        if "__duplicate__" in result:
            return result
        given = result.get("time_this_iter_s")
        this_iter = float(given) if given is not None else time.time() - start
        self._time_total = getattr(self, "_time_total", 0.0) + this_iter
        self._time_since_restore = getattr(self, "_time_since_restore", 0.0) + this_iter
        self._iterations_since_restore = getattr(self, "_iterations_since_restore", 0) + 1
        result.setdefault("done", False)
        for key, total in (("timesteps_this_iter", "_timesteps_total"),
                           ("episodes_this_iter", "_episodes_total")):
            if result.get(key) is not None:
                setattr(self, total, (getattr(self, total, None) or 0) + result[key])
        if result.get("timesteps_this_iter") is not None:
            self._timesteps_since_restore = (getattr(self, "_timesteps_since_restore", 0)
                                             + result["timesteps_this_iter"])
        for key, total in (("timesteps_total", "_timesteps_total"),
                           ("episodes_total", "_episodes_total")):
            if getattr(self, total, None) is not None:
                result.setdefault(key, getattr(self, total))
        now = datetime.datetime.today()
        try:
            ip = socket.gethostbyname(socket.gethostname())
        except OSError:
            ip = "127.0.0.1"
        result.update({
            "trial_id": self._trial_id if self._trial_id is not None else "default",
            "date": now.strftime("%Y-%m-%d_%H-%M-%S"),
            "timestamp": result.get("timestamp") or int(time.mktime(now.timetuple())),
            "time_this_iter_s": this_iter,
            "time_total_s": self._time_total,
            "pid": os.getpid(),
            "hostname": platform.node(),
            "node_ip": ip,
            "config": self.config,
            "time_since_restore": self._time_since_restore,
            "iterations_since_restore": self._iterations_since_restore,
        })
        if getattr(self, "_timesteps_since_restore", 0):
            result["timesteps_since_restore"] = self._timesteps_since_restore
        return result

    def _train_step(self) -> dict[str, Any]:
        """One ``step()`` as a trial reports it: the step's dict with ``training_iteration``
        (the run adds the timing keys to the row)."""
        result = self.step()
        if not isinstance(result, Mapping):
            raise TypeError(
                f"{type(self).__name__}.step() must return a dict of metrics, got "
                f"{type(result).__name__}: {result!r:.80}."
            )
        self._iteration += 1
        result = dict(result)
        result.setdefault("training_iteration", self._iteration)
        return result

    def save(self, checkpoint_dir: str | None = None) -> str:
        checkpoint_dir = checkpoint_dir or tempfile.mkdtemp(prefix="tandem-trainable-")
        os.makedirs(checkpoint_dir, exist_ok=True)
        out = self.save_checkpoint(checkpoint_dir)
        with open(os.path.join(checkpoint_dir, _META_FILE), "w") as f:
            json.dump({"iteration": self._iteration,
                       "time_total": getattr(self, "_time_total", 0.0)}, f)
        if isinstance(out, Mapping):
            with open(os.path.join(checkpoint_dir, _DICT_FILE), "wb") as f:
                pickle.dump(dict(out), f)
        elif isinstance(out, (str, os.PathLike)) and os.fspath(out) != checkpoint_dir:
            rel = os.path.relpath(os.fspath(out), checkpoint_dir)
            if rel.startswith(".."):
                raise ValueError(
                    f"{type(self).__name__}._save returned {out!r}, which is outside the "
                    f"checkpoint directory {checkpoint_dir!r}; return a path inside it."
                )
            with open(os.path.join(checkpoint_dir, _PATH_FILE), "w") as f:
                f.write(rel)
        return checkpoint_dir

    def restore(self, checkpoint_dir: str) -> None:
        meta = os.path.join(checkpoint_dir, _META_FILE)
        if os.path.exists(meta):  # the iteration count goes on from the checkpoint's
            with open(meta) as f:
                meta_data = json.load(f)
            self._iteration = int(meta_data.get("iteration", self._iteration))
            self._time_total = float(meta_data.get("time_total", 0.0))
            self._time_since_restore, self._iterations_since_restore = 0.0, 0
        dict_file = os.path.join(checkpoint_dir, _DICT_FILE)
        path_file = os.path.join(checkpoint_dir, _PATH_FILE)
        if os.path.exists(dict_file):
            with open(dict_file, "rb") as f:
                self.load_checkpoint(pickle.load(f))
        elif os.path.exists(path_file):
            with open(path_file) as f:
                self.load_checkpoint(os.path.join(checkpoint_dir, f.read().strip()))
        else:
            self.load_checkpoint(checkpoint_dir)

    def stop(self) -> None:
        self.cleanup()


def is_trainable_class(obj: object) -> TypeGuard[type[Trainable]]:
    return inspect.isclass(obj) and issubclass(obj, Trainable)


#: Set in a worker process that may run another trial after this one (reuse_actors).
REUSE_ENV = "TANDEM_REUSED_WORKER"
# the Trainable instance a reused process keeps for its next trial, by class
_REUSABLE: dict[tuple[str, str], Trainable] = {}


def _class_key(cls: type) -> tuple[str, str]:
    # by name: a class pickled by value is a new class object in every trial's task
    return (cls.__module__, cls.__qualname__)


class ClassTrainableRunner:
    """The function a ``Trainable`` class runs as inside its trial's worker."""

    def __init__(self, cls: type[Trainable], checkpoint_frequency: int = 0,
                 checkpoint_at_end: bool = False, stop: Mapping[str, Any] | None = None,
                 kwargs: Mapping[str, Any] | None = None) -> None:
        self.cls = cls
        self.checkpoint_frequency = checkpoint_frequency
        self.checkpoint_at_end = checkpoint_at_end
        self.stop = dict(stop) if isinstance(stop, Mapping) else None
        self.kwargs = dict(kwargs or {})
        self.__name__ = cls.__name__

    def __call__(self, config: dict[str, Any]) -> None:
        trainable = self._reused(config)
        if trainable is None:
            trainable = self.cls(config, **self.kwargs)
        session = train_session.get_session()
        ckpt = train_session.get_checkpoint()
        if ckpt is not None:
            with ckpt.as_directory() as d:
                trainable.restore(d)
        if session is not None:
            trainable._iteration = session.iteration
        try:
            while True:
                result = trainable._train_step()
                done = bool(result.get("done")) or self._should_stop(result)
                it = trainable.iteration
                want = (self.checkpoint_frequency and it % self.checkpoint_frequency == 0) or (
                    done and self.checkpoint_at_end) or bool(result.get(SHOULD_CHECKPOINT))
                checkpoint = None
                tmp = None
                if want:
                    tmp = trainable.save()
                    checkpoint = Checkpoint.from_directory(tmp)
                try:
                    train_session.report(result, checkpoint)
                finally:  # a trial stopped at this report leaves no temporary folder
                    if tmp is not None:
                        shutil.rmtree(tmp, ignore_errors=True)
                if session is not None and getattr(session, "checkpoint_requested", False):
                    # a tune.Callback set result["should_checkpoint"] (Ray's forced save)
                    session.checkpoint_requested = False
                    if not want:
                        tmp = trainable.save()
                        try:
                            session.attach_checkpoint(Checkpoint.from_directory(tmp))
                        finally:
                            shutil.rmtree(tmp, ignore_errors=True)
                if done:
                    break
        except BaseException:
            trainable.stop()
            raise
        if os.environ.get(REUSE_ENV) == "1":
            # TuneConfig(reuse_actors=True): this process may run the next trial; the
            # instance waits for it (Ray keeps the actor and calls reset_config)
            _REUSABLE[_class_key(self.cls)] = trainable
        else:
            trainable.stop()

    def _reused(self, config: dict[str, Any]) -> Trainable | None:
        """The instance of the trial this process ran before, reset for ``config`` (Ray's
        ``Trainable.reset``), or None when there is none."""
        old = _REUSABLE.pop(_class_key(self.cls), None)
        _REUSABLE.clear()
        if old is None:
            return None
        ctx = train_session.get_context()
        old.config = dict(config)
        old._trial_id, old._trial_name, old._logdir = ctx.trial_id, ctx.trial_name, ctx.trial_dir
        if not old.reset_config(copy.deepcopy(old.config)):
            old.stop()
            raise ConfigError(
                f"Could not re-use the worker of {type(old).__name__} for trial "
                f"{ctx.trial_name}: Trainable runner reuse requires reset_config() to be "
                f"implemented and return True (TuneConfig(reuse_actors=True)). Implement "
                f"{type(old).__name__}.reset_config(new_config), or set reuse_actors=False."
            )
        old._iteration = 0
        return old

    def _should_stop(self, result: Mapping[str, object]) -> bool:
        if not self.stop:
            return False
        stopper = self.__dict__.get("_stopper")
        if stopper is None:
            from tandem.tune.stopper import DictStopper

            stopper = self.__dict__["_stopper"] = DictStopper(self.stop)
        return bool(stopper("", dict(result)))


class FunctionTrainableRunner:
    """A function trainable as its trial runs it: what it returns or yields is reported, as
    Ray's function API does. A dict is reported as a result; a number as the unnamed metric
    ``tune.result.DEFAULT_METRIC`` (``"_metric"``); None is ignored. A generator function
    reports each value it yields.
    """

    def __init__(self, fn: Callable[..., object]) -> None:
        from tandem.train.api.validation import check_train_fn

        self.fn = fn
        self.pass_config = check_train_fn(fn, "the trainable")
        self.__name__ = getattr(fn, "__name__", type(fn).__name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__doc__ = getattr(fn, "__doc__", None)

    def __call__(self, config: dict[str, Any]) -> object:
        args = (config,) if self.pass_config else ()
        if inspect.isgeneratorfunction(self.fn):
            output = None
            for output in self.fn(*args):
                _report_output(output)
            return output
        output = self.fn(*args)
        if inspect.iscoroutine(output):
            import asyncio

            output = asyncio.run(output)
        _report_output(output, returned=True)
        return output


def _report_output(output: object, returned: bool = False) -> None:
    """Reports what a function trainable returned or yielded (Ray's ``handle_output``).

    A *returned* value that is neither a dict nor a number is ignored with a warning, as Ray
    1.x did (programs written for it return e.g. the list of worker results); Ray 2.x raises
    ``ValueError`` there, and for a yielded value tandem does too."""
    from tandem.tune.result import DEFAULT_METRIC

    if output is None or (not output and not isinstance(output, numbers.Number)):
        return
    if isinstance(output, Mapping):
        train_session.report(dict(output))
    elif isinstance(output, numbers.Number) and not isinstance(output, bool):
        train_session.report({DEFAULT_METRIC: output})
    elif returned:
        import logging

        logging.getLogger(__name__).warning(
            "The trainable returned %.80r (%s), which is not reported: return a dict of "
            "metrics or a number to report it.", output, type(output).__name__)
    else:
        raise ValueError(
            f"Invalid return or yield value {output!r:.80} ({type(output).__name__}). Either "
            "return/yield a single number or a dictionary object in your trainable function."
        )


_INLINE_MAX_BYTES = 8 << 20
"""Bound objects up to this size travel inside the trainable's pickle; larger ones are
written once to a shared file that every trial maps (zero-copy for NumPy arrays)."""


class _SharedBlob:
    """Objects pickled once (protocol 5, out-of-band buffers) into one file in shared memory
    (``/dev/shm`` where there is one): every trial on this machine maps the same pages, so a
    200 MB array costs 200 MB once, not once per trial, and loads without a copy (arrays are
    copy-on-write: a trial's writes stay its own). The driver removes the file when the
    trainable is garbage-collected or the process exits."""

    def __init__(self, head: bytes, buffers: list[pickle.PickleBuffer]) -> None:
        import struct
        import weakref

        folder = "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()
        fd, self.path = tempfile.mkstemp(prefix="tandem-with-parameters-", dir=folder)
        with os.fdopen(fd, "wb") as f:
            raws = [b.raw() for b in buffers]
            f.write(struct.pack("<QQ", len(head), len(raws)))
            f.write(struct.pack(f"<{len(raws)}Q", *(r.nbytes for r in raws)))
            f.write(head)
            for r in raws:
                f.write(r)
        self.nbytes = os.path.getsize(self.path)
        weakref.finalize(self, _remove_file, self.path)

    def __getstate__(self) -> dict[str, object]:
        return {"path": self.path, "nbytes": self.nbytes}

    def __setstate__(self, state: Mapping[str, object]) -> None:
        self.__dict__.update(state)  # a trial's copy: it never removes the file

    def load(self) -> dict[str, object]:
        import mmap
        import struct

        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, the map stays
        except FileNotFoundError:
            raise ConfigError(
                f"tune.with_parameters(): the bound objects ({self.nbytes} bytes) were shared "
                f"through {self.path}, which this worker cannot see (another machine, or the "
                f"driver has exited). Keep the objects under {_INLINE_MAX_BYTES >> 20} MB, or "
                f"load them inside the trainable from shared storage."
            ) from None
        with f:
            mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
        n_head, n_bufs = struct.unpack_from("<QQ", mm, 0)
        sizes = struct.unpack_from(f"<{n_bufs}Q", mm, 16)
        pos = 16 + 8 * n_bufs
        view = memoryview(mm)
        head = view[pos:pos + n_head]
        pos += n_head
        bufs = []
        for size in sizes:
            bufs.append(view[pos:pos + size])
            pos += size
        return dict(pickle.loads(head, buffers=bufs))


def _remove_file(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


class _WithParameters:
    """A trainable with large objects bound once: pickled once, and above
    ``_INLINE_MAX_BYTES`` shared through one file that every trial maps (Ray keeps them in
    its object store once, for the same reason)."""

    def __init__(self, trainable: Callable[..., object], params: Mapping[str, object]) -> None:
        self.trainable = trainable
        # pickled once; NumPy (and other protocol-5) buffers are not copied to measure them
        buffers: list[pickle.PickleBuffer] = []
        head = cloudpickle.dumps(dict(params), protocol=5, buffer_callback=buffers.append)
        size = len(head) + sum(b.raw().nbytes for b in buffers)
        self._blob: bytes | None = None
        self._shared: _SharedBlob | None = None
        if size <= _INLINE_MAX_BYTES:
            self._blob = cloudpickle.dumps(dict(params))
        else:
            self._shared = _SharedBlob(head, buffers)
        self._params: dict[str, object] | None = dict(params)
        self.__name__ = getattr(trainable, "__name__", type(trainable).__name__)

    def __getstate__(self) -> dict[str, object]:
        return {"trainable": self.trainable, "_blob": self._blob, "_shared": self._shared,
                "__name__": self.__name__}

    def __setstate__(self, state: Mapping[str, object]) -> None:
        self.__dict__.update(state)
        self._params = None

    @property
    def params(self) -> dict[str, object]:
        if self._params is None:
            if self._shared is not None:
                self._params = self._shared.load()
            else:
                assert self._blob is not None
                self._params = cloudpickle.loads(self._blob)
        return self._params

    def __call__(self, config: dict[str, Any]) -> object:
        return self.trainable(config, **self.params)


def with_parameters(trainable: type[Trainable] | Callable[..., object], **kwargs: object
                    ) -> _ClassWithParameters | _WithParameters:
    """Binds large objects (datasets, models) to a trainable: ``f(config, data=...)``.

    For a ``Trainable`` class they are passed to ``setup(config, **kwargs)``.
    """
    if is_trainable_class(trainable):
        return _ClassWithParameters(trainable, kwargs)
    if not callable(trainable):
        raise ConfigError(
            f"tune.with_parameters() takes a function or Trainable class, got "
            f"{type(trainable).__name__}."
        )
    return _WithParameters(trainable, kwargs)


class _ClassWithParameters:
    def __init__(self, cls: type[Trainable], params: Mapping[str, object]) -> None:
        self.cls = cls
        self.params = dict(params)
        self.__name__ = cls.__name__


class FunctionTrainable(Trainable):
    """Ray's ``Trainable`` around a train function; ``wrap_function(fn)`` makes one.

    Given to ``tune.Tuner`` / ``tune.run``, it runs its function as a function trainable:
    ``tune.report`` calls, a returned or yielded dict (or number, the unnamed metric) and
    checkpoints behave as for ``fn`` itself. tandem runs trials as worker processes, not
    Trainable actors, so the class is not instantiated by hand: that raises, saying so.
    """

    _name = "func"

    def __init__(self, config: dict[str, Any] | None = None,
                 storage: StorageContext | None = None, **kwargs: object) -> None:
        raise ConfigError(
            f"{type(self).__name__}(...): a FunctionTrainable runs only as a trial; give the "
            "class (or the function itself) to tune.Tuner(...) or tune.run(...)."
        )

    @staticmethod
    def _train_func(config: dict[str, object]) -> object:
        raise NotImplementedError

    def _trainable_func(self, config: dict[str, object]) -> object:
        """Runs the function on ``config`` (what a trial of this class runs)."""
        return FunctionTrainableRunner(type(self)._train_func)(config)


def wrap_function(train_func: Callable[..., object], name: str | None = None
                  ) -> type[FunctionTrainable]:
    """A :class:`FunctionTrainable` subclass running ``train_func`` (Ray's ``wrap_function``).

    Raises:
        ValueError: ``train_func`` does not take a single ``config`` parameter (Ray's check).
    """
    if not callable(train_func):
        raise ValueError(
            f"wrap_function({train_func!r}): give a function f(config) that calls tune.report."
        )
    try:
        check_function_trainable(train_func)
    except ConfigError as e:
        raise ValueError(
            "Unknown argument found in the Trainable function. The function args must "
            f"include a single 'config' positional parameter.\n{e}"
        ) from None
    label: str = str(name or getattr(train_func, "__name__", "func"))
    resources = getattr(train_func, "_resources", None)

    class ImplicitFunc(FunctionTrainable):
        _name = label
        _train_func = staticmethod(train_func)

        def __repr__(self) -> str:
            return self._name

        @classmethod
        def default_resource_request(cls, config: dict[str, Any]) -> TrialResources | None:
            if callable(resources) and not isinstance(resources, Mapping):
                return resources(config)
            return resources

    ImplicitFunc.__name__ = ImplicitFunc.__qualname__ = label
    return ImplicitFunc


ResourcesSpec: TypeAlias = (
    "TrialResources | Callable[[dict[str, Any]], TrialResources | None] | None")
"""What ``tune.with_resources`` takes: a trial's resources, or a function of the config
giving them."""


class _WithResources:
    def __init__(self, trainable: Callable[..., object], resources: ResourcesSpec) -> None:
        self.trainable = trainable
        self.resources = resources
        self.__name__ = getattr(trainable, "__name__", type(trainable).__name__)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.trainable(*args, **kwargs)


def with_resources(trainable: type[Trainable] | Callable[..., object],
                   resources: ResourcesSpec) -> _WithResources:
    """Sets each trial's resources: a dict (``{"CPU": 2, "GPU": 0.5}``; lowercase ``cpu``/
    ``gpu`` accepted as Ray does), a ``ScalingConfig`` (a gang of workers per trial), or a
    function ``config -> dict``, or a ``tune.PlacementGroupFactory`` (the trial's one worker
    holds the sum of its bundles; a function of the config may return one too)."""
    return _WithResources(trainable, resources)


def normalize_resources(resources: object, config: Mapping[str, object] | None = None
                        ) -> dict[str, float] | ScalingConfig | PlacementGroupFactory | None:
    """A resources spec → a per-worker bundle dict, or a ScalingConfig or
    PlacementGroupFactory (returned as is)."""
    from tandem.train.api.config import ScalingConfig
    from tandem.tune.execution.placement_groups import PlacementGroupFactory

    if callable(resources) and not isinstance(resources, (Mapping, PlacementGroupFactory)):
        resources = resources(config or {})
    if resources is None or isinstance(resources, (ScalingConfig, PlacementGroupFactory)):
        return resources
    if not isinstance(resources, Mapping):
        raise ConfigError(
            f"tune.with_resources(): resources must be a dict such as {{'CPU': 2, 'GPU': 1}}, "
            f"a ScalingConfig, a PlacementGroupFactory, or a function of the config returning "
            f"one; got "
            f"{type(resources).__name__}."
        )
    out: dict[str, float] = {}
    for key, value in resources.items():
        out[_RESOURCE_NAMES[key] if key in _RESOURCE_NAMES else key] = value
    return out


_RESOURCE_NAMES = {"cpu": "CPU", "gpu": "GPU"}


def trainable_name(trainable: object) -> str:

    for attr in ("trainable", "cls"):
        inner = getattr(trainable, attr, None)
        if inner is not None and not isinstance(trainable, type):
            return trainable_name(inner)
    name = getattr(trainable, "__name__", None) or type(trainable).__name__
    return "trainable" if name == "<lambda>" else name


def check_function_trainable(fn: Callable[..., object]) -> None:

    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return
    required = [p for p in params if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    if len(required) > 1:
        raise ConfigError(
            f"The trainable {getattr(fn, '__name__', fn)!r} takes {len(required)} required "
            f"parameters ({', '.join(p.name for p in required)}); a function trainable takes "
            f"one (the config). Bind other arguments with tune.with_parameters(fn, name=value)."
        )
