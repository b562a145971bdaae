"""``XGBoostTrainer``: one XGBoost model trained by a gang of workers through XGBoost's own
collective (a ``RabitTracker`` on rank 0, every worker joined with
``xgboost.collective.init``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train._internal import gbdt
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    import xgboost

    from tandem.train.api.checkpoint import Checkpoint
    from tandem.train.context import TrainContext


class XGBoostConfig(BackendConfig):
    """Args:
        timeout_s: how long a worker waits for its peers in a collective call.
    """

    def __init__(self, timeout_s: int = 1800) -> None:
        self.timeout_s = timeout_s

    def backend(self) -> Backend:
        return XGBoostBackend(self.timeout_s)

    def __repr__(self) -> str:
        return f"XGBoostConfig(timeout_s={self.timeout_s})"


class XGBoostBackend(Backend):
    """Rank 0 starts XGBoost's tracker and hands its address to the others through the
    driver; every worker then joins XGBoost's collective (rank = tandem's world rank)."""

    preload = ("xgboost", "pandas")

    def __init__(self, timeout_s: int = 1800) -> None:
        self.timeout_s = timeout_s
        self._tracker: Any = None
        self._joined = False

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{"TANDEM_GBDT_NODE_IP": ip, "TANDEM_XGB_TRACKER_HOST": node_ips[0]}
                for ip in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        import xgboost.collective as coll

        from tandem.train.session import get_session

        session = get_session()
        if context.world_size == 1 or session is None:
            return
        if context.world_rank == 0:
            from xgboost.tracker import RabitTracker

            host = os.environ.get("TANDEM_XGB_TRACKER_HOST") or "127.0.0.1"
            self._tracker = RabitTracker(n_workers=context.world_size, host_ip=host, port=0,
                                         sortby="task", timeout=self.timeout_s)
            self._tracker.start()
            args = dict(self._tracker.worker_args())
            session.call("rendezvous_set", args)
        else:
            args = session.call("rendezvous_get", None, timeout_s=self.timeout_s)
        coll.init(**args, dmlc_task_id=str(context.world_rank), dmlc_timeout=self.timeout_s)
        self._joined = True

    def on_worker_shutdown(self, context: TrainContext) -> None:
        if self._joined:
            import xgboost.collective as coll

            self._joined = False
            coll.finalize()
        if self._tracker is not None:
            tracker, self._tracker = self._tracker, None
            with contextlib.suppress(Exception):  # a failed gang: its tracker goes with it
                tracker.wait_for(timeout=30)
            tracker.free()


def _xgb_dmatrix(x: Any, y: Any) -> Any:
    import xgboost

    return xgboost.DMatrix(x, label=y, enable_categorical=True,
                           nthread=gbdt.worker_threads() or None)


def xgboost_params_form(config: dict[str, Any]) -> None:
    """The per-worker function of ``XGBoostTrainer(params=...)``."""
    import xgboost

    from tandem.train import get_checkpoint, get_context
    from tandem.train.xgboost.callback import RayTrainReportCallback

    shards = gbdt.worker_datasets(config)
    if xgboost.collective.get_world_size() > 1:
        gbdt.unify_categories(shards, _allgather)
    label = config["label_column"]
    mats = {name: _xgb_dmatrix(*gbdt.features_and_label(s, label)) for name, s in shards.items()}
    params = dict(config["params"])
    if gbdt.worker_threads():
        params.setdefault("nthread", gbdt.worker_threads())
    if "device" not in params and os.environ.get("CUDA_VISIBLE_DEVICES", "") not in ("", "-1"):
        params["device"] = "cuda"
    start_model = None
    total = int(config["num_boost_round"])
    checkpoint = get_checkpoint()
    if checkpoint is not None:
        start_model = RayTrainReportCallback.get_model(checkpoint)
    done = start_model.num_boosted_rounds() if start_model is not None else 0
    if checkpoint is not None and done and get_context().world_rank == 0:
        print(f"resuming at round {done + 1} of {total} from {checkpoint.path}", flush=True)
    if done >= total:
        return
    callback = RayTrainReportCallback(frequency=config["checkpoint_frequency"],
                                      checkpoint_at_end=config["checkpoint_at_end"])
    xgboost.train(params, mats["train"], num_boost_round=total - done,
                  evals=[(m, name) for name, m in mats.items()], xgb_model=start_model,
                  callbacks=[callback], verbose_eval=False)


def _allgather(value: Any) -> list[Any]:
    import xgboost.collective as coll

    return [coll.broadcast(value, r) for r in range(coll.get_world_size())]


class XGBoostTrainer(gbdt.BoostedTreeTrainer):
    """Trains one XGBoost model on ``scaling_config.num_workers`` workers, each holding a
    shard of the data, joined by XGBoost's collective.

    Params form::

        XGBoostTrainer(params={"objective": "binary:logistic", "eval_metric": ["logloss"]},
                       label_column="target", num_boost_round=50,
                       datasets={"train": train_df, "valid": valid_df},
                       scaling_config=ScalingConfig(num_workers=2))

    Function form: ``XGBoostTrainer(train_fn_per_worker, train_loop_config=...,
    datasets=...)``, where the function calls ``xgboost.train(...,
    callbacks=[RayTrainReportCallback()])`` on ``train.get_dataset_shard(name)``.

    Reports ``<eval set>-<metric>`` once per round; checkpoints the booster every
    ``CheckpointConfig.checkpoint_frequency`` rounds (default 10) and at the end; a failed
    gang restarts from the last checkpointed round.
    """

    library = "xgboost"
    _backend_config_cls = XGBoostConfig

    def __init__(self, train_loop_per_worker: Any = None, *,
                 xgboost_config: XGBoostConfig | None = None, **kwargs: Any) -> None:
        if xgboost_config is not None:
            kwargs.setdefault("backend_config", xgboost_config)
        super().__init__(train_loop_per_worker, **kwargs)

    def _params_form_fn(self) -> Any:
        return xgboost_params_form

    def _check_params(self, params: dict[str, Any], described: Mapping[str, Any],
                      label_column: Any) -> None:
        head = gbdt.head_xy(described["train"], label_column)
        if head is None:
            return
        import xgboost

        probe = {**params, "nthread": 1, "device": "cpu", "verbosity": 0}
        try:
            xgboost.train(probe, _xgb_dmatrix(*head), num_boost_round=1)
        except xgboost.core.XGBoostError as e:
            raise ConfigError(
                f"XGBoost rejected params={params!r}: {_first_lines(str(e))} Fix params (see "
                f"https://xgboost.readthedocs.io/en/stable/parameter.html)."
            ) from None

    @staticmethod
    def get_model(checkpoint: Checkpoint,
                  filename: str = "model.ubj") -> xgboost.Booster:
        """The booster saved in a checkpoint of this trainer (e.g. ``result.checkpoint``)."""
        from tandem.train.xgboost.callback import RayTrainReportCallback

        return RayTrainReportCallback.get_model(checkpoint, filename)


def _first_lines(msg: str) -> str:
    """XGBoost's message without its native stack trace."""
    lines = [ln for ln in msg.splitlines() if ln.strip() and not ln.lstrip().startswith(
        ("Stack trace", "[bt]"))]
    text = " ".join(ln.split(": ", 1)[-1] if ln.startswith("[") else ln for ln in lines)
    return text.strip().rstrip(".") + "."
