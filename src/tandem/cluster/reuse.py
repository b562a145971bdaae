"""What a reused worker process is put back to between two tasks, for code that runs
several tasks inside one (a tuner's trial stream, ``tandem.train.stream``): the same reset
a clean-reuse worker does between two tasks (``docs/warm_workers.md``)."""

from __future__ import annotations

import os
import sys

from tandem.cluster import _worker_main


class ProcessBaseline:
    """The process as it is now (environment, working directory, ``sys.path``,
    ``sys.argv``, the modules imported): ``restore()`` puts it back so, dropping the modules
    imported since from the user's code (installed packages stay imported) and reseeding
    ``random`` / ``numpy.random`` from the OS, as a fresh process would have them."""

    def __init__(self) -> None:
        self._env = dict(os.environ)
        self._env_data = _worker_main._environ_data()
        self._cwd = os.getcwd()
        self._path = list(sys.path)
        self._argv = list(sys.argv)
        self._modules = set(sys.modules)
        self._exit_handlers = _worker_main.user_exit_handlers()

    def restore(self) -> None:
        _worker_main._restore_environ(self._env, self._env_data)
        os.chdir(self._cwd)
        sys.path[:] = self._path
        sys.argv[:] = self._argv
        _worker_main._drop_user_modules(self._modules)
        _worker_main._reseed()

    def left_running(self) -> bool:
        """Whether a task left something a fresh process would not have (a thread of its
        own, a ``multiprocessing`` child, a CUDA context, torch/TensorFlow/JAX loaded, an
        ``atexit`` handler registered): such a process must not run another task."""
        return _worker_main._left_running(self._exit_handlers)
