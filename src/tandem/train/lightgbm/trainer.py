"""``LightGBMTrainer``: one LightGBM model trained by a gang of workers through LightGBM's
own network (``machines`` / ``local_listen_port`` / ``num_machines``, ports picked by
tandem), data-parallel tree learning on each worker's shard."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem.train._internal import gbdt
from tandem.train.backends.base import Backend, BackendConfig
from tandem.train.lightgbm._link import _LINK, gang_link

if TYPE_CHECKING:
    from tandem.train.context import TrainContext

_NETWORK: dict[str, Any] = {}
_JOINED: list[bool] = []  # [True] once join_network has initialised LightGBM's network


def get_network_params() -> dict[str, Any]:
    """Inside a ``LightGBMTrainer`` worker: the params that join this worker to the gang's
    LightGBM network (``machines``, ``local_listen_port``, ``num_machines``, ...); add them
    to the params you give ``lightgbm.train``. Empty with one worker."""
    return dict(_NETWORK)


class LightGBMConfig(BackendConfig):
    """Args:
        timeout_s: how long LightGBM waits for its peers to connect (``time_out``, seconds).
    """

    def __init__(self, timeout_s: int = 120) -> None:
        self.timeout_s = timeout_s

    def backend(self) -> Backend:
        return LightGBMBackend(self.timeout_s)

    def __repr__(self) -> str:
        return f"LightGBMConfig(timeout_s={self.timeout_s})"


class LightGBMBackend(Backend):
    """Each worker picks a free port on its node; the gang's ``host:port`` list (in rank
    order) is gathered and becomes LightGBM's ``machines``."""

    preload = ("lightgbm", "pandas")

    def __init__(self, timeout_s: int = 120) -> None:
        self.timeout_s = timeout_s

    def worker_env(self, node_ips: Sequence[str]) -> list[Mapping[str, str]]:
        return [{"TANDEM_GBDT_NODE_IP": ip} for ip in node_ips]

    def on_worker_start(self, context: TrainContext) -> None:
        _NETWORK.clear()
        _LINK.clear()
        if context.world_size == 1:
            return
        host = gbdt.node_ip()
        port = gbdt.free_port(host)
        link = gbdt.GangLink(context.world_rank, context.world_size, timeout_s=self.timeout_s)
        _LINK.append(link)
        machines = link.allgather(f"{host}:{port}")
        _NETWORK.update(machines=",".join(machines), local_listen_port=port,
                        num_machines=context.world_size, time_out=max(1, self.timeout_s // 60))

    def on_worker_shutdown(self, context: TrainContext) -> None:
        _NETWORK.clear()
        if _JOINED:
            _JOINED.clear()
            from lightgbm.basic import _LIB, _safe_call

            _safe_call(_LIB.LGBM_NetworkFree())
        while _LINK:
            _LINK.pop().close()


def _listening(port: int) -> bool | None:
    """Whether a socket of this host listens on ``port`` (None: cannot tell, no /proc)."""
    suffix = f":{port:04X}"
    readable = False
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                readable = True
                for line in f:
                    parts = line.split()
                    if len(parts) > 3 and parts[1].endswith(suffix) and parts[3] == "0A":
                        return True
        except OSError:
            continue
    return False if readable else None


def join_network(timeout_s: float = 60.0) -> dict[str, Any]:
    """Joins this worker to the gang's LightGBM network, in an order that lets every
    connection succeed at its first try, and returns the params ``lightgbm.train`` then
    needs (``num_machines``, no ``machines``: the network is already up). Empty with one
    worker.

    LightGBM's own start (``machines`` in params) has each rank listen and then connect to
    every higher rank; a rank that is not listening yet costs its peer a 200 ms retry sleep
    (more, growing, on a busy machine), which was most of a short distributed fit's
    overhead. Here the highest rank starts first and each lower rank starts once every
    higher one listens (seen in /proc/net/tcp; told over the gang's link)."""
    import ctypes
    import threading
    import time

    from lightgbm.basic import _LIB, _c_str, _safe_call

    link = gang_link()
    if not _NETWORK or link is None:
        return {}
    if _JOINED:
        return _joined_params()
    port, world = int(_NETWORK["local_listen_port"]), int(_NETWORK["num_machines"])
    rank = link.rank
    go = threading.Event()
    failed: list[BaseException] = []

    def conduct() -> None:
        try:
            for r in range(world - 1, 0, -1):  # rank r starts; all learn when it listens
                if r == rank:
                    go.set()
                    deadline = time.monotonic() + timeout_s
                    while _listening(port) is False and time.monotonic() < deadline:
                        time.sleep(0.001)
                link.allgather(None)
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            failed.append(e)
        finally:
            go.set()

    conductor = threading.Thread(target=conduct, name="tandem-lightgbm-network", daemon=True)
    conductor.start()
    go.wait()
    if failed:
        raise failed[0]
    _safe_call(_LIB.LGBM_NetworkInit(
        _c_str(_NETWORK["machines"]), ctypes.c_int(port),
        ctypes.c_int(int(_NETWORK["time_out"])), ctypes.c_int(world)))
    _JOINED.append(True)
    conductor.join()
    if failed:
        raise failed[0]
    return _joined_params()


def _joined_params() -> dict[str, object]:
    return {"num_machines": int(_NETWORK["num_machines"]), "tree_learner": "data",
            "pre_partition": True}


def worker_params(params: Mapping[str, object]) -> dict[str, Any]:
    """The params a worker trains with: the user's, quiet by default, this worker's CPU
    share as ``num_threads``, and (with several workers) the gang's network joined
    (data-parallel tree learner on pre-partitioned shards, unless params say otherwise)."""
    out = dict(params)
    out.setdefault("verbose", -1)
    if gbdt.worker_threads():
        out.setdefault("num_threads", gbdt.worker_threads())
    for key, value in join_network().items():
        if key == "num_machines":
            out[key] = value
        else:
            out.setdefault(key, value)
    for key in ("machines", "local_listen_port", "machine_list_filename"):
        out.pop(key, None)  # the network is up; LightGBM must not start another
    return out


def lightgbm_params_form(config: Mapping[str, object]) -> None:
    """The per-worker function of ``LightGBMTrainer(params=...)``."""
    gbdt.params_form_loop(LightGBMTrainer, config)


class LightGBMTrainer(gbdt.BoostedTreeTrainer):
    """Trains one LightGBM model on ``scaling_config.num_workers`` workers, each holding a
    shard of the data, joined by LightGBM's network (data-parallel tree learner).

    Params form: ``LightGBMTrainer(params={"objective": "binary", "metric":
    ["binary_logloss", "binary_error"]}, label_column="target", num_boost_round=50,
    datasets={"train": df, "valid": df2})``. Function form: ``LightGBMTrainer(fn,
    train_loop_config=..., datasets=...)`` where ``fn`` calls ``lightgbm.train({**params,
    **get_network_params()}, ..., callbacks=[RayTrainReportCallback()])``.

    ``lightgbm_config=LightGBMConfig(timeout_s=...)`` sets how long peers wait for each other.

    Reports ``<eval set>-<metric>`` once per round; checkpoints the booster every
    ``CheckpointConfig.checkpoint_frequency`` rounds (default 10) and at the end.
    """

    library = "lightgbm"
    display_name = "LightGBM"
    _backend_config_cls = LightGBMConfig
    config_keyword = "lightgbm_config"
    docs_url = "https://lightgbm.readthedocs.io/en/stable/Parameters.html"

    def _params_form_fn(self) -> Callable[[dict[str, object]], None]:
        return lightgbm_params_form

    # -- the library's part, on each worker -------------------------------------------------
    @classmethod
    def report_callback_class(cls) -> Any:
        from tandem.train.lightgbm.callback import RayTrainReportCallback

        return RayTrainReportCallback

    @classmethod
    def rounds_in(cls, booster: Any) -> int:
        return int(booster.current_iteration())

    @classmethod
    def unify_categories(cls, shards: Mapping[str, object]) -> None:
        link = gang_link()
        if link is not None:
            gbdt.unify_categories(shards, link.allgather)

    @classmethod
    def train_booster(cls, params: Mapping[str, Any], splits: Mapping[str, Any], rounds: int,
                      start: Any, callback: Any) -> None:
        import lightgbm

        params = worker_params(params)
        sets: dict[str, Any] = {}
        train_set = None
        for name, (x, y) in splits.items():  # "train" first
            if train_set is None:
                train_set = sets[name] = lightgbm.Dataset(x, label=y, params=params,
                                                          free_raw_data=False)
            else:
                sets[name] = lightgbm.Dataset(x, label=y, reference=train_set)
        assert train_set is not None
        lightgbm.train(params, train_set, num_boost_round=rounds,
                       valid_sets=list(sets.values()), valid_names=list(sets),
                       init_model=start, callbacks=[callback])

    # -- on the driver ----------------------------------------------------------------------
    @classmethod
    def _probe(cls, params: Mapping[str, object], head: tuple[Any, Any]) -> str | None:
        import lightgbm

        probe = {**params, "num_threads": 1, "verbose": -1, "min_data_in_leaf": 1,
                 "min_data_in_bin": 1}
        for key in ("machines", "num_machines", "local_listen_port", "tree_learner"):
            probe.pop(key, None)
        try:
            lightgbm.train(probe, lightgbm.Dataset(*head, params={"verbose": -1}),
                           num_boost_round=1)
        except lightgbm.basic.LightGBMError as e:
            return str(e).strip().rstrip(".") + "."
        return None
