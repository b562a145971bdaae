"""MLflow tracking: ``MLflowLoggerCallback`` (one MLflow run per trial, logged from the
driver) and ``setup_mlflow`` (an MLflow run inside a trial or a train worker).

Ray's ``ray.air.integrations.mlflow`` with the same signatures and semantics (Ray 2.60);
Ray users import it from ``tandem.air.integrations.mlflow``. Needs MLflow:
``pip install "tandem-ml[mlflow]"``. MLflow is imported when a callback is built or
``setup_mlflow`` is called, never at ``import tandem.tune``.

What a run holds (``MLflowLoggerCallback``):

- run name and tag ``trial_name``: the trial's name; the callback's ``tags`` too;
- params: the trial's config, nested keys flattened with ``/`` (``{"opt": {"lr": 0.1}}`` ->
  ``opt/lr``), logged when the trial starts (or at its end with
  ``log_params_on_trial_end=True``);
- metrics: every numeric value of every result, at ``step = timesteps_total`` if reported,
  else ``training_iteration``;
- status: ``FINISHED`` when the trial ends (finished or stopped early by a scheduler or
  stopper), ``FAILED`` when it fails for good, ``KILLED`` for a trial still running when
  the experiment ends (interrupted) — Ray leaves that run ``RUNNING``;
- artifacts: the trial's folder, with ``save_artifact=True``.

The callback writes from a background thread, in order (results that queued up go in one
``log_batch``), so the tune loop never waits on the store; ``on_experiment_end`` waits until
everything is written.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem._core.extras import import_optional
from tandem.train import session as train_session
from tandem.tune.callback import LoggerCallback, refuse_in_train_run
from tandem.tune.search.variant_generator import flatten_dict

if TYPE_CHECKING:
    from tandem.tune.trial import TuneTrial

logger = logging.getLogger(__name__)

__all__ = ["MLflowLoggerCallback", "setup_mlflow"]

_PARAM_LIMIT = 6000  # MLflow refuses longer param values


def _import_mlflow(what: str) -> ModuleType:
    return import_optional("mlflow", "mlflow", what)


class _NoopModule:
    """What ``setup_mlflow`` returns on workers other than rank 0: every attribute and call
    is a no-op, so ``mlflow = setup_mlflow(config); mlflow.log_metric(...)`` logs once."""

    def __getattr__(self, item: str) -> _NoopModule:
        return _NoopModule()

    def __call__(self, *args: object, **kwargs: object) -> None:
        return None


def _float_metrics(result: Mapping[str, object]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in flatten_dict(result).items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            continue  # MLflow metrics are numbers; strings, lists... are skipped (as Ray)
    return out


def _param_value(value: object) -> str:
    text = str(value)
    return text if len(text) <= _PARAM_LIMIT else text[:_PARAM_LIMIT - 3] + "..."


def _check_tracking_uri(mlflow: ModuleType, tracking_uri: str | None, where: str) -> None:
    """Refuses a tracking URI MLflow cannot use, naming it, before any run is created.

    An ``http(s)://`` server is probed once with a short timeout: MLflow's own client would
    retry for minutes before it says anything.
    """
    uri = tracking_uri if tracking_uri is not None else mlflow.get_tracking_uri()
    if isinstance(uri, str) and uri.startswith(("http://", "https://")):
        import urllib.error
        import urllib.request

        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=10):
                pass
        except urllib.error.HTTPError:
            pass  # the server answered (an old one may lack /health): usable
        except (OSError, ValueError) as e:
            raise ConfigError(
                f"{where}(tracking_uri={uri!r}): no MLflow tracking server answers there "
                f"({e}). Start one (mlflow server --backend-store-uri sqlite:///mlflow.db), "
                f"or give a local store such as tracking_uri='sqlite:///mlflow.db'."
            ) from e


def _store_error(where: str, uri: str | None, e: BaseException) -> ConfigError:
    first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ConfigError(
        f"{where}(tracking_uri={uri!r}): MLflow cannot use this tracking store: "
        f"{first[:400].rstrip('. ')}. "
        f"Give a store MLflow can open, e.g. tracking_uri='sqlite:///mlflow.db' (a SQLite "
        f"file), or the http:// address of an MLflow server."
    )


class _MLflowSession:
    """Ray's ``_MLflowLoggerUtil``: sets the tracking/registry URIs, finds or creates the
    experiment, and logs through one ``MlflowClient``."""

    def __init__(self, mlflow: ModuleType, where: str) -> None:
        self.mlflow = mlflow
        self.where = where
        self.experiment_id: str | None = None
        self.client: Any = None

    def setup(self, *, tracking_uri: str | None, registry_uri: str | None,
              experiment_id: str | None, experiment_name: str | None,
              tracking_token: str | None, artifact_location: str | None,
              create_experiment_if_not_exists: bool) -> None:
        mlflow = self.mlflow
        from mlflow.exceptions import MlflowException

        if tracking_token:
            os.environ["MLFLOW_TRACKING_TOKEN"] = tracking_token
        _check_tracking_uri(mlflow, tracking_uri, self.where)
        try:
            mlflow.set_tracking_uri(tracking_uri)
            mlflow.set_registry_uri(registry_uri)
            from mlflow.tracking import MlflowClient

            self.client = MlflowClient(tracking_uri=mlflow.get_tracking_uri(),
                                       registry_uri=mlflow.get_registry_uri())
            if experiment_id is None:
                experiment_id = os.environ.get("MLFLOW_EXPERIMENT_ID")
            if experiment_id is not None:
                try:
                    self.client.get_experiment(experiment_id)
                    self.experiment_id = experiment_id
                    return
                except MlflowException:
                    pass  # no such id: try the name (Ray's order)
            if experiment_name is None:
                experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME")
            found = (self.client.get_experiment_by_name(experiment_name)
                     if experiment_name is not None else None)
            if found is not None:
                self.experiment_id = found.experiment_id
                return
            if experiment_name and create_experiment_if_not_exists:
                try:
                    self.experiment_id = self.client.create_experiment(
                        experiment_name, artifact_location=artifact_location)
                except MlflowException as e:
                    # trials that start together each find no experiment and create it: the
                    # one whose create comes second uses the other's instead of failing
                    found = (self.client.get_experiment_by_name(experiment_name)
                             if e.error_code == "RESOURCE_ALREADY_EXISTS" else None)
                    if found is None:
                        raise
                    self.experiment_id = found.experiment_id
                return
        except (MlflowException, OSError) as e:  # OSError: e.g. a SQLite path under a file
            raise _store_error(self.where, tracking_uri, e) from e
        except ConfigError:
            raise
        except Exception as e:  # e.g. sqlite: a folder that does not exist
            if type(e).__module__.startswith(("sqlalchemy", "mlflow", "alembic", "sqlite3")):
                raise _store_error(self.where, tracking_uri, e) from e
            raise
        if create_experiment_if_not_exists:
            raise ConfigError(
                f"{self.where}(experiment_id={experiment_id!r}): no MLflow experiment has this "
                f"id and no experiment_name was given. Pass experiment_name='...' (it is "
                f"created if missing) or the id of an existing experiment."
            )
        raise ConfigError(
            f"{self.where}(experiment_id={experiment_id!r}, experiment_name="
            f"{experiment_name!r}): no such MLflow experiment in {mlflow.get_tracking_uri()!r}. "
            f"Create it first (mlflow.create_experiment(...)), pass the name of an existing "
            f"one, or pass create_experiment_if_not_exists=True."
        )

    def log_params(self, run_id: str, params: Mapping[str, object], skip: set[str]) -> None:
        from mlflow.entities import Param

        flat = {k: v for k, v in flatten_dict(params).items() if k not in skip}
        for start in range(0, len(flat), 100):  # MLflow takes at most 100 params a batch
            batch = list(flat.items())[start:start + 100]
            self.client.log_batch(run_id, params=[Param(k, _param_value(v)) for k, v in batch])
        skip.update(flat)


class MLflowLoggerCallback(LoggerCallback):
    """Logs each trial to MLflow from the driver: one run per trial, its config as params,
    every result's numbers as metrics, ended with the trial's status (see the module
    docstring). Ray's ``MLflowLoggerCallback``, same arguments.

    Args:
        tracking_uri: where runs go: ``sqlite:///path.db``, an ``http(s)://`` MLflow server,
            ``databricks``...; None: MLflow's default (``MLFLOW_TRACKING_URI``).
        registry_uri: MLflow's model registry URI.
        experiment_name: the MLflow experiment; created if missing. None: the
            ``MLFLOW_EXPERIMENT_NAME`` / ``MLFLOW_EXPERIMENT_ID`` environment variables, or
            MLflow's default experiment.
        tags: tags set on every run (``trial_name`` is added).
        tracking_token: sets ``MLFLOW_TRACKING_TOKEN`` (for a server that needs one).
        save_artifact: log the trial's folder (results, checkpoints) as the run's artifacts
            when the trial ends.
        log_params_on_trial_end: log the config when the trial ends instead of when it
            starts.

    Raises:
        ImportError: MLflow is not installed (the message says what to install).
        ConfigError: from ``Tuner.fit()``, before any trial starts: the tracking store
            cannot be used (unknown scheme, a server that does not answer, a SQLite file in
            a folder that does not exist).
    """

    def __init__(
        self,
        tracking_uri: str | None = None,
        *,
        registry_uri: str | None = None,
        experiment_name: str | None = None,
        tags: dict[str, Any] | None = None,
        tracking_token: str | None = None,
        save_artifact: bool = False,
        log_params_on_trial_end: bool = False,
    ) -> None:
        self._mlflow = _import_mlflow("MLflowLoggerCallback")
        if tags is not None and not isinstance(tags, Mapping):
            raise ConfigError(f"MLflowLoggerCallback(tags={tags!r}): tags is a dict of tag "
                              f"names to values, e.g. tags={{'user': 'me'}}.")
        self.tracking_uri = tracking_uri
        self.registry_uri = registry_uri
        self.experiment_name = experiment_name
        self.tags = dict(tags) if tags is not None else None
        self.tracking_token = tracking_token
        self.should_save_artifact = save_artifact
        self.log_params_on_trial_end = log_params_on_trial_end
        self.mlflow_util = _MLflowSession(self._mlflow, "MLflowLoggerCallback")
        self._trial_runs: dict[str, str] = {}
        self._logged_params: dict[str, set[str]] = {}
        self._writer: _Writer | None = None

    def setup(self, **info: object) -> None:
        """Called by ``Tuner.fit()`` before trials start: opens the store and finds or
        creates the experiment (a store that cannot be used fails ``fit()`` here)."""
        self.mlflow_util.setup(
            tracking_uri=self.tracking_uri, registry_uri=self.registry_uri,
            experiment_id=None, experiment_name=self.experiment_name,
            tracking_token=self.tracking_token, artifact_location=None,
            create_experiment_if_not_exists=True,
        )
        if self.tags is None:
            self.tags = {}
        self._trial_runs = {}
        self._logged_params = {}
        if self._writer is not None:
            self._writer.close()
        self._writer = _Writer(self.mlflow_util.client)
        self._writer.start()

    def _client(self) -> Any:
        if self.mlflow_util.client is None:  # used without Tuner.fit() calling setup()
            self.setup()
        return self.mlflow_util.client

    def check_run(self) -> None:
        """In a Trainer's ``RunConfig``: refused (see ``refuse_in_train_run``)."""
        refuse_in_train_run(self, "setup_mlflow")

    def log_trial_start(self, trial: TuneTrial) -> None:
        client = self._client()
        trial_id = trial.trial_id
        if trial_id not in self._trial_runs:
            name = str(getattr(trial, "name", trial_id))
            tags = {str(k): str(v) for k, v in (self.tags or {}).items()}
            tags["trial_name"] = name
            run = client.create_run(experiment_id=self.mlflow_util.experiment_id,
                                    run_name=name, tags=tags)
            self._trial_runs[trial_id] = run.info.run_id
            self._logged_params[trial_id] = set()
        if not self.log_params_on_trial_end:
            self._log_params(trial)

    def _log_params(self, trial: TuneTrial) -> None:
        # MLflow params are write-once: a trial restarted with a new config (PBT) keeps the
        # values it was first logged with; its config's later values are in its results.
        run_id, config = self._trial_runs[trial.trial_id], dict(trial.config)
        skip = self._logged_params[trial.trial_id]
        assert self._writer is not None
        self._writer.call(lambda: self.mlflow_util.log_params(run_id, config, skip))

    def log_trial_result(self, iteration: int, trial: TuneTrial, result: dict[str, Any]) -> None:
        if trial.trial_id not in self._trial_runs:
            self.log_trial_start(trial)
        from mlflow.entities import Metric

        step = int(result.get("timesteps_total") or result.get("training_iteration", 0))
        now = int(time.time() * 1000)
        metrics = [Metric(k, v, now, step) for k, v in _float_metrics(result).items()]
        assert self._writer is not None
        self._writer.metrics(self._trial_runs[trial.trial_id], metrics)

    def log_trial_end(self, trial: TuneTrial, failed: bool = False) -> None:
        run_id = self._trial_runs.pop(trial.trial_id, None)
        if run_id is None:
            return  # never started (stopped while pending)
        client = self._client()
        skip = self._logged_params.pop(trial.trial_id, set())
        config, path = dict(trial.config), str(trial.path)

        def end() -> None:
            if self.should_save_artifact:
                from tandem.tune.logger import wait_for_files

                wait_for_files()  # the trial's result files, written by their own thread
                self._save_artifacts(client, run_id, path)
            if self.log_params_on_trial_end:
                self.mlflow_util.log_params(run_id, config, skip)
            client.set_terminated(run_id, status="FAILED" if failed else "FINISHED")

        assert self._writer is not None
        self._writer.call(end)

    @staticmethod
    def _save_artifacts(client: Any, run_id: str, path: str) -> None:
        if os.path.isdir(path):
            client.log_artifacts(run_id, local_dir=path)
            return
        import fsspec

        fs, root = fsspec.core.url_to_fs(path)  # a trial folder on s3:// etc.
        if not fs.exists(root):
            return
        with tempfile.TemporaryDirectory() as local:
            fs.get(root.rstrip("/") + "/", local, recursive=True)
            client.log_artifacts(run_id, local_dir=local)

    def on_experiment_end(self, trials: Sequence[TuneTrial], **info: object) -> None:
        """Ends runs whose trial still runs (``KILLED``), then waits until everything is
        written."""
        writer = self._writer
        if writer is None:
            return
        client = self.mlflow_util.client
        for trial_id, run_id in list(self._trial_runs.items()):
            writer.call(functools.partial(client.set_terminated, run_id, status="KILLED"))
            del self._trial_runs[trial_id]
        writer.close()
        self._writer = None


class _Writer(threading.Thread):
    """Makes one callback's MLflow calls in order, off the tune controller's thread (a
    store write takes milliseconds; the controller must not wait on it). Results that
    queued up meanwhile go to MLflow in one ``log_batch`` per run."""

    def __init__(self, client: Any) -> None:
        super().__init__(name="mlflow-logger", daemon=True)
        self._queue: queue.SimpleQueue[tuple[str, Any, Any]] = queue.SimpleQueue()
        self._client = client

    def call(self, fn: Callable[[], None]) -> None:
        self._queue.put(("call", fn, None))

    def metrics(self, run_id: str, metrics: list[Any]) -> None:
        self._queue.put(("metrics", run_id, metrics))

    def close(self, timeout_s: float = 600.0) -> None:
        """Writes what is queued, then ends the thread."""
        self._queue.put(("stop", None, None))
        self.join(timeout_s)
        if self.is_alive():
            logger.warning("MLflowLoggerCallback: MLflow writes still pending after %s s.",
                           timeout_s)

    def run(self) -> None:
        while True:
            ops = [self._queue.get()]
            while True:
                try:
                    ops.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            pending: dict[str, list[Any]] = {}
            for kind, a, b in ops:
                if kind == "metrics":
                    pending.setdefault(a, []).extend(b)
                    continue
                self._flush(pending)  # keep the order: results before what follows them
                if kind == "stop":
                    return
                self._guard(a)
            self._flush(pending)

    def _flush(self, pending: dict[str, list[Any]]) -> None:
        for run_id, metrics in pending.items():
            for start in range(0, len(metrics), 1000):  # MLflow's limit per batch
                self._guard(functools.partial(self._client.log_batch, run_id,
                                              metrics=metrics[start:start + 1000]))
        pending.clear()

    @staticmethod
    def _guard(fn: Callable[[], object]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - a tracking failure must not stop trials
            logger.error("MLflowLoggerCallback: an MLflow write failed: %s", e)


def setup_mlflow(
    config: Mapping[str, object] | None = None,
    tracking_uri: str | None = None,
    registry_uri: str | None = None,
    experiment_id: str | None = None,
    experiment_name: str | None = None,
    tracking_token: str | None = None,
    artifact_location: str | None = None,
    run_name: str | None = None,
    create_experiment_if_not_exists: bool = False,
    tags: Mapping[str, object] | None = None,
    rank_zero_only: bool = True,
) -> ModuleType | _NoopModule:
    """Starts an MLflow run in this trial or train worker and returns the ``mlflow`` module
    (Ray's ``setup_mlflow``, same arguments and defaults).

    ``config`` is logged as the run's params. In a tuning trial the experiment id defaults
    to the trial id and the name to the trial name (so pass ``experiment_name`` — with
    ``create_experiment_if_not_exists=True`` if it may not exist yet — or set
    ``MLFLOW_EXPERIMENT_NAME``). In a train run with several workers only rank 0 gets a run;
    the others get a no-op module, so ``mlflow.log_metric(...)`` logs once
    (``rank_zero_only=False``: every worker gets a run). The run is the active run of the
    process: end it with ``mlflow.end_run()`` (the worker's exit ends it too, FINISHED).

    Raises:
        ImportError: MLflow is not installed.
        ConfigError: the tracking store cannot be used, or no experiment matches and
            ``create_experiment_if_not_exists`` is False.
    """
    mlflow = _import_mlflow("setup_mlflow")
    ctx = train_session.get_context()
    if rank_zero_only and ctx.get_world_rank() != 0:
        return _NoopModule()  # a train run's other workers: rank 0 logs
    session = _MLflowSession(mlflow, "setup_mlflow")
    experiment_id = experiment_id or ctx.trial_id
    experiment_name = experiment_name or ctx.trial_name
    session.setup(tracking_uri=tracking_uri, registry_uri=registry_uri,
                  experiment_id=experiment_id, experiment_name=experiment_name,
                  tracking_token=tracking_token, artifact_location=artifact_location,
                  create_experiment_if_not_exists=create_experiment_if_not_exists)
    active = mlflow.active_run()
    if active is None:
        active = mlflow.start_run(run_name=run_name or experiment_name,
                                  experiment_id=session.experiment_id, tags=tags or {})
        run_id = active.info.run_id

        def end_run(failed: bool) -> None:  # as the process exit ends it under Ray
            current = mlflow.active_run()
            if current is not None and current.info.run_id == run_id:
                mlflow.end_run(status="FAILED" if failed else "FINISHED")

        train_session.at_worker_exit(end_run)
    if config:
        session.log_params(active.info.run_id, config, set())
    return mlflow
