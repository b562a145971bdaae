"""Runs ``ValidationConfig.fn`` on committed checkpoints, off the training workers' path.

The controller hands each checkpoint reported with ``validation=...`` to a
:class:`ValidationRunner` once every rank has reported it. The runner validates one
checkpoint at a time, in report order (Ray's ``MAX_IN_FLIGHT_VALIDATIONS = 1``), each in a
fresh Python process (``python -m tandem.train._internal.validation``) so a validation never
blocks the controller or the workers, and one past its ``timeout_s`` can be killed. When one
ends, ``notify`` is called (from the runner's thread) and the controller takes the outcome
with :meth:`ValidationRunner.take_finished`.

The process reads a cloudpickle payload (the run's ``sys.path``, the pickled
``ValidationConfig``, the report's ``validation`` and the checkpoint's path) and writes
``("ok", metrics)`` or ``("error", traceback text)`` to a result file; no result file means
the process died (started again within ``max_retries``).
"""

from __future__ import annotations

import collections
import logging
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import field
from typing import Any

import cloudpickle

from tandem._core.records import record

logger = logging.getLogger(__name__)

COMMITTED = "COMMITTED"
PENDING = "PENDING_VALIDATION"
VALIDATED = "VALIDATED"
TIMEOUT = "VALIDATION_TIMEOUT"
FAILED = "VALIDATION_FAILED"


@record
class ValidationPlan:
    """A run's ``ValidationConfig`` as the controller needs it: the config pickled (it is
    unpickled only in the validation process, which has the user's modules on its path), and
    the defaults the controller itself applies."""

    config_bytes: bytes
    default_timeout_s: float | None
    max_retries: int = 3
    env_vars: dict[str, str] = field(default_factory=dict)
    sys_path: tuple[str, ...] = ()

    @classmethod
    def of(cls, config: Any) -> ValidationPlan:
        kw = config.ray_remote_kwargs
        return cls(cloudpickle.dumps(config), config.task_config.timeout_s,
                   kw.get("max_retries", 3),
                   dict((kw.get("runtime_env") or {}).get("env_vars") or {}),
                   tuple(sys.path))


@record(frozen=False)
class Outcome:
    iteration: int
    path: str
    status: str
    metrics: dict[str, Any]
    error: str = ""


class ValidationRunner:
    def __init__(self, plan: ValidationPlan, notify: Callable[[], None]) -> None:
        self.plan = plan
        self._notify = notify
        self._lock = threading.Lock()
        self._queue: collections.deque[tuple[int, str, Any]] = collections.deque()
        self._running: threading.Thread | None = None
        self._proc: subprocess.Popen | None = None
        self._finished: list[Outcome] = []
        self._aborted = False
        self._idle = threading.Condition(self._lock)

    # -- controller side ---------------------------------------------------------------
    def submit(self, iteration: int, path: str, spec: object) -> None:
        with self._lock:
            if self._aborted:
                return
            self._queue.append((iteration, path, spec))
            self._kick()

    def take_finished(self) -> list[Outcome]:
        with self._lock:
            out, self._finished = self._finished, []
            return out

    @property
    def busy(self) -> bool:
        with self._lock:
            return bool(self._queue) or self._running is not None

    def wait(self, timeout_s: float | None = None) -> list[Outcome]:
        """Waits until every submitted validation has ended; returns the outcomes not yet
        taken."""
        with self._idle:
            self._idle.wait_for(lambda: not self._queue and self._running is None, timeout_s)
        return self.take_finished()

    def abort(self) -> None:
        """Drops the queued validations and kills the running one (the run is ending)."""
        with self._lock:
            self._aborted = True
            self._queue.clear()
            proc, thread = self._proc, self._running
        if proc is not None and proc.poll() is None:
            proc.kill()
        if thread is not None:
            thread.join(timeout=30)

    # -- runner thread -----------------------------------------------------------------
    def _kick(self) -> None:  # under the lock
        if self._running is not None or not self._queue or self._aborted:
            return
        job = self._queue.popleft()
        self._running = threading.Thread(target=self._run, args=(job,), daemon=True,
                                         name=f"tandem-validation-{job[0]}")
        self._running.start()

    def _run(self, job: tuple[int, str, object]) -> None:
        iteration, path, spec = job
        try:
            outcome = self._validate(iteration, path, spec)
        except Exception:  # noqa: BLE001 - our own failure: the checkpoint's validation failed
            outcome = Outcome(iteration, path, FAILED, {}, traceback.format_exc())
        with self._lock:
            aborted = self._aborted
        if aborted:  # as Ray: left pending, for the next run with this storage path
            logger.info("Validation was cancelled for checkpoint %s because the run was "
                        "aborted. It will be retried in the next train run with the same "
                        "storage path and name if there is one.", path)
        elif outcome.status == FAILED:
            logger.error("Validation failed for checkpoint %s:\n%s", path, outcome.error)
        elif outcome.status == TIMEOUT:
            logger.warning("Validation for checkpoint %s exceeded timeout_s=%ss. Cancelled.",
                           path, _timeout(self.plan, spec))
        with self._lock:
            self._running = None
            self._proc = None
            if not self._aborted:
                self._finished.append(outcome)
            self._kick()
            self._idle.notify_all()
        self._notify()

    def _validate(self, iteration: int, path: str, spec: object) -> Outcome:
        timeout = _timeout(self.plan, spec)
        deadline = time.monotonic() + timeout if timeout is not None else None
        retries = self.plan.max_retries
        attempt = 0
        with tempfile.TemporaryDirectory(prefix="tandem-validation-") as tmp:
            payload = os.path.join(tmp, "payload.pkl")
            with open(payload, "wb") as f:
                cloudpickle.dump((self.plan.sys_path, self.plan.config_bytes, spec, path), f)
            while True:
                result = os.path.join(tmp, f"result{attempt}.pkl")
                status, value = self._attempt(payload, result, deadline)
                if status == "ok":
                    return Outcome(iteration, path, VALIDATED, value)
                if status == "error":
                    return Outcome(iteration, path, FAILED, {}, value)
                if status == "timeout":
                    return Outcome(iteration, path, TIMEOUT, {})
                with self._lock:
                    aborted = self._aborted
                if aborted or (retries != -1 and attempt >= retries):
                    return Outcome(iteration, path, FAILED, {}, value)
                attempt += 1

    def _attempt(self, payload: str, result: str, deadline: float | None) -> tuple[str, Any]:
        env = {**os.environ, **self.plan.env_vars}
        env["PYTHONPATH"] = os.pathsep.join(p for p in self.plan.sys_path if p) or env.get(
            "PYTHONPATH", "")
        with self._lock:
            if self._aborted:
                return "died", "the run ended before the validation started"
            self._proc = proc = subprocess.Popen(
                [sys.executable, "-m", "tandem.train._internal.validation", payload, result],
                stdin=subprocess.DEVNULL, env=env)
        try:
            proc.wait(timeout=None if deadline is None else max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return "timeout", None
        try:
            with open(result, "rb") as f:
                return cloudpickle.load(f)
        except (OSError, EOFError):
            return "died", (f"the validation process exited with code {proc.returncode} "
                            f"before returning a result")


def _timeout(plan: ValidationPlan, spec: object) -> float | None:
    from tandem.train.v2.api.validation_config import ValidationTaskConfig

    if isinstance(spec, ValidationTaskConfig):
        return spec.timeout_s
    return plan.default_timeout_s


# -- the validation process ----------------------------------------------------------------


def _child(payload: str, result: str) -> int:
    with open(payload, "rb") as f:
        sys_path, config_bytes, spec, path = cloudpickle.load(f)
    for p in reversed(sys_path):
        if p not in sys.path:
            sys.path.insert(0, p)
    try:
        from tandem.train.api.checkpoint import Checkpoint
        from tandem.train.v2.api.validation_config import merged_kwargs

        config = cloudpickle.loads(config_bytes)
        kwargs = merged_kwargs(config, spec)
        retry = config.ray_remote_kwargs.get("retry_exceptions", False)
        retries = config.ray_remote_kwargs.get("max_retries", 3)
        attempt = 0
        while True:
            try:
                metrics = config.fn(Checkpoint(path), **kwargs)
                break
            except Exception as e:
                again = retry is True or (isinstance(retry, (list, tuple))
                                          and isinstance(e, tuple(retry)))
                if not again or (retries != -1 and attempt >= retries):
                    raise
                attempt += 1
        if not isinstance(metrics, dict):
            raise ValueError(
                "The validation function must return a dictionary of metrics. "
                f"Got {type(metrics)} instead."
            )
        outcome: tuple[str, Any] = ("ok", metrics)
        data = cloudpickle.dumps(outcome)
    except BaseException:  # noqa: BLE001 - reported to the controller as the failure
        data = cloudpickle.dumps(("error", traceback.format_exc()))
    with open(result + ".tmp", "wb") as f:
        f.write(data)
    os.replace(result + ".tmp", result)
    return 0


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1], sys.argv[2]))
