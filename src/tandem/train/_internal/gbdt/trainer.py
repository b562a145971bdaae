"""The params-form trainer base both boosted-tree libraries share (``BoostedTreeTrainer``)
and the training each of its workers runs: load the shard, resume from the run's
checkpoint, train the remaining rounds with the library's report callback."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tandem._core.errors import ConfigError
from tandem.train._internal import data as data_mod
from tandem.train._internal.gbdt.data import (
    FileSource,
    Pieces,
    describe,
    features_and_label,
    head_xy,
    worker_datasets,
)
from tandem.train.api.checkpoint import Checkpoint
from tandem.train.api.config import DataConfig, RunConfig, ScalingConfig
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.base import BackendConfig

if TYPE_CHECKING:
    from tandem.train.v2.api.validation_config import ValidationConfig

DEFAULT_CHECKPOINT_FREQUENCY = 10


class BoostedTreeTrainer(DataParallelTrainer):
    """A ``DataParallelTrainer`` for a boosted-tree library, in two spellings:

    - params form: ``Trainer(params={...}, label_column="y", num_boost_round=N,
      datasets={"train": ..., "valid": ...})`` — tandem's own per-worker function loads each
      worker's shard and trains one model with the library's collective;
    - function form: ``Trainer(train_fn_per_worker, train_loop_config=..., datasets=...)`` —
      your function calls the library's ``train`` with the report callback; the collective is
      set up around it.
    """

    library = "?"  # the module name: xgboost, lightgbm
    display_name = "?"
    config_keyword = "?"  # the keyword of the library's BackendConfig: xgboost_config, ...
    docs_url = ""
    param_space_keys = ("params", "num_boost_round")

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.config_keyword != "?":
            cls.__signature__ = library_signature(cls)  # type: ignore[attr-defined]

    def __init__(
        self,
        train_loop_per_worker: Callable[..., object] | None = None,
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        scaling_config: ScalingConfig | None = None,
        run_config: RunConfig | None = None,
        datasets: Mapping[str, Any] | None = None,
        dataset_config: DataConfig | None = None,
        validation_config: ValidationConfig | None = None,
        metadata: Mapping[str, Any] | None = None,
        resume_from_checkpoint: Checkpoint | None = None,
        label_column: str | int | None = None,
        params: Mapping[str, Any] | None = None,
        num_boost_round: int | None = None,
        backend_config: BackendConfig | None = None,
        **library_config: BackendConfig | None,
    ) -> None:
        """Ray's signature (each library's trainer shows it, see ``library_signature``),
        with the library's backend config under its own keyword (``xgboost_config``,
        ``lightgbm_config``); ``backend_config`` is tandem's older spelling of the same."""
        name = type(self).__name__
        for key, value in library_config.items():
            if key != self.config_keyword:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
            if value is not None and not isinstance(value, self._backend_config_cls):
                raise ConfigError(
                    f"{name}({key}=...) takes a {self._backend_config_cls.__name__}, got "
                    f"{type(value).__name__}; pass {key}="
                    f"{self._backend_config_cls.__name__}(...) or leave it out."
                )
            if value is not None and backend_config is None:
                backend_config = value
        if train_loop_per_worker is not None:
            given = [k for k, v in (("params", params), ("label_column", label_column),
                                    ("num_boost_round", num_boost_round)) if v is not None]
            if given:
                raise ConfigError(
                    f"{name}: {', '.join(given)} belong to the params form "
                    f"({name}(params=..., label_column=..., num_boost_round=..., "
                    f"datasets=...)); with a train function, put them in train_loop_config "
                    f"and call {self.library}.train yourself."
                )
            super().__init__(
                train_loop_per_worker, train_loop_config=train_loop_config,
                backend_config=backend_config, scaling_config=scaling_config,
                run_config=run_config, datasets=datasets, dataset_config=dataset_config,
                resume_from_checkpoint=resume_from_checkpoint, metadata=metadata,
                validation_config=validation_config,
            )
            return
        if validation_config is not None:
            raise ConfigError(
                f"{name}(params=..., validation_config=...): the params form's own loop "
                f"reports its checkpoints without validation=, so the validation function "
                f"would never run. Use the function form ({name}(train_fn, ..., "
                f"validation_config=...)) and call train.report(..., checkpoint=..., "
                f"validation=True) in it, or remove validation_config."
            )
        if params is None or not isinstance(params, Mapping):
            raise ConfigError(
                f"{name} needs params={{...}} ({self.library} parameters such as "
                f"{{'objective': ...}}) or a train function as its first argument; got "
                f"params={params!r:.60}."
            )
        if train_loop_config is not None:
            raise ConfigError(
                f"{name}(params=...) takes no train_loop_config (that is for the function "
                f"form); pass library parameters in params=."
            )
        rounds = 10 if num_boost_round is None else num_boost_round
        if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
            raise ConfigError(
                f"{name}(num_boost_round={num_boost_round!r}): give a positive whole number "
                f"of boosting rounds."
            )
        if not datasets or "train" not in datasets:
            raise ConfigError(
                f"{name}(params=...) needs datasets={{'train': data, ...}} (and optionally "
                f"'valid' and other names to evaluate); got "
                f"{list(datasets) if datasets else 'none'}."
            )
        sc = scaling_config if scaling_config is not None else ScalingConfig()
        if hasattr(sc, "check_resolved"):
            sc.check_resolved()  # a search space over num_workers belongs in a Tuner
        n = getattr(sc, "num_workers", 1)
        described: dict[str, Any] = {}
        for key in sorted(datasets, key=lambda k: k != "train"):  # "train" first
            described[key] = describe(key, datasets[key], n, label_column)
        self._check_params(dict(params), described, label_column)
        rc = run_config if run_config is not None else RunConfig()
        cc = rc.checkpoint_config
        if cc is not None and cc.checkpoint_at_end is False:
            raise ConfigError(
                f"{name}(run_config=RunConfig(checkpoint_config=CheckpointConfig("
                f"checkpoint_at_end=False))): the trained booster is always saved at the end "
                f"(result.checkpoint and {name}.get_model read it); remove checkpoint_at_end."
            )
        freq = getattr(cc, "checkpoint_frequency", 0) or DEFAULT_CHECKPOINT_FREQUENCY
        self._checkpoint_schedule_read = True
        kinds = {k: ("files", v) if isinstance(v, FileSource) else
                 ("ray", None) if data_mod.is_ray_dataset(v) else ("pieces", len(v.pieces))
                 for k, v in described.items()}
        loop = {
            "params": dict(params), "label_column": label_column, "num_boost_round": rounds,
            "datasets": kinds, "checkpoint_frequency": int(freq),
            "checkpoint_at_end": True,  # the trained booster is always kept
        }
        shipped = {k: (list(v.pieces) if isinstance(v, Pieces) else v)
                   for k, v in described.items() if not isinstance(v, FileSource)}
        super().__init__(
            self._params_form_fn(), train_loop_config=loop, backend_config=backend_config,
            scaling_config=scaling_config, run_config=run_config, datasets=shipped,
            dataset_config=dataset_config, resume_from_checkpoint=resume_from_checkpoint,
            # the console's progress line: "training_iteration 12/50" (one report a round)
            metadata={"progress_total": rounds, "progress_key": "training_iteration",
                      **dict(metadata or {})},
        )
        self.params = dict(params)
        self.label_column = label_column
        self.num_boost_round = rounds

    # -- the library's part ----------------------------------------------------------------
    def _params_form_fn(self) -> Callable[[dict[str, object]], None]:
        """The per-worker function of the params form (module level: it is pickled)."""
        raise NotImplementedError

    @classmethod
    def report_callback_class(cls) -> Any:
        """The library's ``RayTrainReportCallback``."""
        raise NotImplementedError

    @classmethod
    def rounds_in(cls, booster: object) -> int:
        """Boosting rounds a loaded booster holds."""
        raise NotImplementedError

    @classmethod
    def unify_categories(cls, shards: dict[str, object]) -> None:
        """Gives category columns the same categories on every worker (see
        ``unify_categories``), through the library's collective."""
        raise NotImplementedError

    @classmethod
    def train_booster(cls, params: Mapping[str, object], splits: Mapping[str, object], rounds: int,
                      start: object, callback: object) -> None:
        """Trains ``rounds`` more rounds on this worker's ``splits`` (``{name: (X, y)}``,
        "train" first) from ``start`` (a booster or None), reporting through
        ``callback``."""
        raise NotImplementedError

    @classmethod
    def _probe(cls, params: Mapping[str, object], head: tuple[object, object]) -> str | None:
        """The library's message when it rejects ``params`` on a few rows, else None."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    def _check_params(self, params: dict[str, object], described: Mapping[str, object],
                      label_column: str | int | None) -> None:
        """Raises ConfigError with the library's message when it rejects ``params`` (tried
        on a few rows of the training data, in the driver; skipped for ray.data)."""
        head = head_xy(described["train"], label_column)
        if head is None:
            return
        message = self._probe(params, head)
        if message is not None:
            raise ConfigError(
                f"{self.display_name} rejected params={params!r}: {message} Fix params (see "
                f"{self.docs_url})."
            )

    @classmethod
    def train_rounds(cls, params: Mapping[str, object], splits: Mapping[str, object], total: int,
                     **kwargs: Any) -> None:
        """Inside a worker: trains up to round ``total`` on this worker's ``splits``
        (``{name: (X, y)}``, "train" first), resuming from the run's checkpoint; see
        ``train_rounds``. The model layer's tree models train through this."""
        train_rounds(cls, params, splits, total, **kwargs)

    @classmethod
    def get_model(cls, checkpoint: Checkpoint, filename: str | None = None) -> Any:
        """The booster saved in a checkpoint of this trainer (e.g. ``result.checkpoint``);
        ``filename`` if it was saved under another name than the callback's default."""
        return cls.report_callback_class().get_model(checkpoint, filename)


def library_signature(cls: type[BoostedTreeTrainer]) -> inspect.Signature:
    """The constructor signature a library's trainer shows (``inspect.signature``, ``help``,
    the Ray parameter audit): ``BoostedTreeTrainer.__init__``'s, with ``**library_config``
    replaced by the library's keyword (``xgboost_config: XGBoostConfig | None = None``)
    right after ``train_loop_config``, where Ray puts it."""
    params = [p for p in inspect.signature(BoostedTreeTrainer.__init__).parameters.values()
              if p.name != "self" and p.kind is not p.VAR_KEYWORD]
    config = inspect.Parameter(cls.config_keyword, inspect.Parameter.KEYWORD_ONLY, default=None,
                               annotation=f"{cls._backend_config_cls.__name__} | None")
    at = [p.name for p in params].index("train_loop_config") + 1
    return inspect.Signature([*params[:at], config, *params[at:]], return_annotation="None")


def train_rounds(trainer_cls: type[BoostedTreeTrainer], params: Mapping[str, object],
                 splits: Mapping[str, object], total: int, *, announce: bool = True,
                 numbered: bool = False, **callback_kwargs: object) -> None:
    """Trains ``total`` rounds on this worker's ``splits`` (``{name: (X, y)}``, "train"
    first), resuming from the run's checkpoint if there is one: the rounds it holds are not
    trained again. ``numbered`` adds ``epoch`` (1, 2, ... across resumes) to the reports."""
    import itertools

    from tandem.train.session import get_checkpoint, get_context

    callback_cls = trainer_cls.report_callback_class()
    checkpoint = get_checkpoint()
    start = (callback_cls.get_model(checkpoint, callback_kwargs.get("filename"))
             if checkpoint is not None else None)
    done = trainer_cls.rounds_in(start) if start is not None else 0
    if announce and checkpoint is not None and done and get_context().world_rank == 0:
        print(f"resuming at round {done + 1} of {total} from {checkpoint.path}", flush=True)
    if done >= total:
        return
    if numbered:
        counter = itertools.count(done + 1)
        callback_kwargs["results_postprocessing_fn"] = (
            lambda metrics: {**metrics, "epoch": next(counter)})
    callback = callback_cls(**callback_kwargs)
    trainer_cls.train_booster(dict(params), splits, total - done, start, callback)


def params_form_loop(trainer_cls: type[BoostedTreeTrainer], config: Mapping[str, Any]) -> None:

    """The per-worker function of a params-form trainer."""
    shards = worker_datasets(config)
    trainer_cls.unify_categories(shards)
    label = config["label_column"]
    splits = {name: features_and_label(s, label) for name, s in shards.items()}
    train_rounds(trainer_cls, config["params"], splits, int(config["num_boost_round"]),
                 frequency=config["checkpoint_frequency"],
                 checkpoint_at_end=config["checkpoint_at_end"])


def worker_threads() -> int:
    """Threads this worker may use (its CPU share), 0 when not set."""
    return int(os.environ.get("TANDEM_NUM_THREADS", "0") or 0)


def gpu_assigned() -> bool:
    """Whether the gang gave this worker a GPU (tandem sets ``CUDA_VISIBLE_DEVICES`` to the
    worker's GPUs, empty for none)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() not in ("", "-1", "NoDevFiles")
