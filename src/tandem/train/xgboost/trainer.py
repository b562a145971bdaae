"""``XGBoostTrainer``: one XGBoost model trained by a gang of workers through XGBoost's own
collective (a ``RabitTracker`` on rank 0, every worker joined with
``xgboost.collective.init``)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem.train._internal import gbdt
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    from tandem.train.context import TrainContext


class XGBoostConfig(BackendConfig):
    """Args:
        xgboost_communicator: the collective's backend; ``"rabit"`` only (XGBoost's
            tracker), as Ray's.
        timeout_s: how long a worker waits for its peers in a collective call.
    """

    def __init__(self, xgboost_communicator: str = "rabit", timeout_s: int = 1800) -> None:
        if xgboost_communicator != "rabit":
            raise ValueError(
                f"Unknown xgboost communicator: {xgboost_communicator!r}. For now, only "
                f"\"rabit\" is supported: XGBoostConfig(xgboost_communicator='rabit')."
            )
        self.xgboost_communicator = xgboost_communicator
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


def _dmatrix(x: object, y: object = None) -> object:
    import xgboost

    return xgboost.DMatrix(x, label=y, enable_categorical=True,
                           nthread=gbdt.worker_threads() or None)


def worker_params(params: Mapping[str, object]) -> dict[str, Any]:
    """The params a worker trains with: the user's, this worker's CPU share as ``nthread``,
    and ``device="cuda"`` when the gang gave this worker a GPU (unless params name a
    device)."""
    out = dict(params)
    if gbdt.worker_threads():
        out.setdefault("nthread", gbdt.worker_threads())
    if "device" not in out and gbdt.gpu_assigned():
        out["device"] = "cuda"
    return out


def xgboost_params_form(config: Mapping[str, object]) -> None:
    """The per-worker function of ``XGBoostTrainer(params=...)``."""
    gbdt.params_form_loop(XGBoostTrainer, config)


def _allgather(value: object) -> list[object]:
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

    ``xgboost_config=XGBoostConfig(timeout_s=...)`` sets the collective's timeout.

    Reports ``<eval set>-<metric>`` once per round; checkpoints the booster every
    ``CheckpointConfig.checkpoint_frequency`` rounds (default 10) and at the end; a failed
    gang restarts from the last checkpointed round.
    """

    library = "xgboost"
    display_name = "XGBoost"
    _backend_config_cls = XGBoostConfig
    config_keyword = "xgboost_config"
    docs_url = "https://xgboost.readthedocs.io/en/stable/parameter.html"

    def _params_form_fn(self) -> Callable[[dict[str, object]], None]:
        return xgboost_params_form

    # -- the library's part, on each worker -------------------------------------------------
    @classmethod
    def report_callback_class(cls) -> Any:
        from tandem.train.xgboost.callback import RayTrainReportCallback

        return RayTrainReportCallback

    @classmethod
    def rounds_in(cls, booster: Any) -> int:
        return int(booster.num_boosted_rounds())

    @classmethod
    def unify_categories(cls, shards: Mapping[str, object]) -> None:
        import xgboost

        if xgboost.collective.get_world_size() > 1:
            gbdt.unify_categories(shards, _allgather)

    @classmethod
    def train_booster(cls, params: Mapping[str, object], splits: Mapping[str, Any], rounds: int,
                      start: object, callback: object) -> None:
        import xgboost

        mats = {name: _dmatrix(x, y) for name, (x, y) in splits.items()}
        xgboost.train(worker_params(params), mats["train"], num_boost_round=rounds,
                      evals=[(m, name) for name, m in mats.items()], xgb_model=start,
                      callbacks=[callback], verbose_eval=False)

    # -- on the driver ----------------------------------------------------------------------
    @classmethod
    def _probe(cls, params: Mapping[str, object], head: tuple[object, object]) -> str | None:
        import xgboost

        probe = {**params, "nthread": 1, "device": "cpu", "verbosity": 0}
        try:
            xgboost.train(probe, _dmatrix(*head), num_boost_round=1)
        except xgboost.core.XGBoostError as e:
            return _first_lines(str(e))
        return None


def _first_lines(msg: str) -> str:
    """XGBoost's message without its native stack trace."""
    lines = [ln for ln in msg.splitlines() if ln.strip() and not ln.lstrip().startswith(
        ("Stack trace", "[bt]"))]
    text = " ".join(ln.split(": ", 1)[-1] if ln.startswith("[") else ln for ln in lines)
    return text.strip().rstrip(".") + "."
