"""``LightGBMTrainer``: one LightGBM model trained by a gang of workers through LightGBM's
own network (``machines`` / ``local_listen_port`` / ``num_machines``, ports picked by
tandem), data-parallel tree learning on each worker's shard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train._internal import gbdt
from tandem.train.backends.base import Backend, BackendConfig

if TYPE_CHECKING:
    import lightgbm

    from tandem.train.api.checkpoint import Checkpoint
    from tandem.train.context import TrainContext

_NETWORK: dict[str, Any] = {}
_LINK: list[gbdt.GangLink] = []  # this worker's link to its gang (metrics are combined over it)
_JOINED: list[bool] = []  # [True] once join_network has initialised LightGBM's network


def gang_link() -> gbdt.GangLink | None:
    return _LINK[0] if _LINK else None


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


def _joined_params() -> dict[str, Any]:
    return {"num_machines": int(_NETWORK["num_machines"]), "tree_learner": "data",
            "pre_partition": True}


def worker_params(params: Mapping[str, Any]) -> dict[str, Any]:
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


def lightgbm_params_form(config: dict[str, Any]) -> None:
    """The per-worker function of ``LightGBMTrainer(params=...)``."""
    import lightgbm

    from tandem.train import get_checkpoint, get_context
    from tandem.train.lightgbm.callback import RayTrainReportCallback

    shards = gbdt.worker_datasets(config)
    link = gang_link()
    if link is not None:
        gbdt.unify_categories(shards, link.allgather)
    label = config["label_column"]
    params = worker_params(config["params"])
    sets: dict[str, Any] = {}
    train_set = None
    for name, shard in shards.items():
        x, y = gbdt.features_and_label(shard, label)
        if train_set is None:
            train_set = sets[name] = lightgbm.Dataset(x, label=y, params=params,
                                                      free_raw_data=False)
        else:
            sets[name] = lightgbm.Dataset(x, label=y, reference=train_set)
    assert train_set is not None
    total = int(config["num_boost_round"])
    start_model = None
    checkpoint = get_checkpoint()
    if checkpoint is not None:
        start_model = RayTrainReportCallback.get_model(checkpoint)
    done = start_model.current_iteration() if start_model is not None else 0
    if checkpoint is not None and done and get_context().world_rank == 0:
        print(f"resuming at round {done + 1} of {total} from {checkpoint.path}", flush=True)
    if done >= total:
        return
    callback = RayTrainReportCallback(frequency=config["checkpoint_frequency"],
                                      checkpoint_at_end=config["checkpoint_at_end"])
    lightgbm.train(params, train_set, num_boost_round=total - done,
                   valid_sets=list(sets.values()), valid_names=list(sets),
                   init_model=start_model, callbacks=[callback])


class LightGBMTrainer(gbdt.BoostedTreeTrainer):
    """Trains one LightGBM model on ``scaling_config.num_workers`` workers, each holding a
    shard of the data, joined by LightGBM's network (data-parallel tree learner).

    Params form: ``LightGBMTrainer(params={"objective": "binary", "metric":
    ["binary_logloss", "binary_error"]}, label_column="target", num_boost_round=50,
    datasets={"train": df, "valid": df2})``. Function form: ``LightGBMTrainer(fn,
    train_loop_config=..., datasets=...)`` where ``fn`` calls ``lightgbm.train({**params,
    **get_network_params()}, ..., callbacks=[RayTrainReportCallback()])``.

    Reports ``<eval set>-<metric>`` once per round; checkpoints the booster every
    ``CheckpointConfig.checkpoint_frequency`` rounds (default 10) and at the end.
    """

    library = "lightgbm"
    _backend_config_cls = LightGBMConfig

    def __init__(self, train_loop_per_worker: Any = None, *,
                 lightgbm_config: LightGBMConfig | None = None, **kwargs: Any) -> None:
        if lightgbm_config is not None:
            kwargs.setdefault("backend_config", lightgbm_config)
        super().__init__(train_loop_per_worker, **kwargs)

    def _params_form_fn(self) -> Any:
        return lightgbm_params_form

    def _check_params(self, params: dict[str, Any], described: Mapping[str, Any],
                      label_column: Any) -> None:
        head = gbdt.head_xy(described["train"], label_column)
        if head is None:
            return
        import lightgbm

        probe = {**params, "num_threads": 1, "verbose": -1, "min_data_in_leaf": 1,
                 "min_data_in_bin": 1}
        for key in ("machines", "num_machines", "local_listen_port", "tree_learner"):
            probe.pop(key, None)
        try:
            lightgbm.train(probe, lightgbm.Dataset(*head, params={"verbose": -1}),
                           num_boost_round=1)
        except lightgbm.basic.LightGBMError as e:
            raise ConfigError(
                f"LightGBM rejected params={params!r}: {str(e).strip().rstrip('.')}. Fix "
                f"params (see https://lightgbm.readthedocs.io/en/stable/Parameters.html)."
            ) from None

    @staticmethod
    def get_model(checkpoint: Checkpoint, filename: str = "model.txt") -> lightgbm.Booster:
        """The booster saved in a checkpoint of this trainer (e.g. ``result.checkpoint``)."""
        from tandem.train.lightgbm.callback import RayTrainReportCallback

        return RayTrainReportCallback.get_model(checkpoint, filename)
