"""``TrainSettings`` and ``TuneSettings``: what ``model.train`` / ``model.tune`` take, as a
dataclass or a plain dict (seed 000: ``{"num_workers": 3, "num_epochs": 10, ...}``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from tandem._core.errors import ConfigError

PRECISIONS = ("32", "bf16", "16")
_PRECISION_ALIASES = {
    "32": "32", "32-true": "32", "fp32": "32", "float32": "32",
    "bf16": "bf16", "bf16-mixed": "bf16", "bfloat16": "bf16",
    "16": "16", "16-mixed": "16", "fp16": "16", "float16": "16",
}
NONFINITE = ("raise", "skip")

S = TypeVar("S", "TrainSettings", "TuneSettings")


def _from_any(cls: type[S], value: object, arg: str) -> S:
    if value is None:
        return cls()
    if isinstance(value, cls):
        return value
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"{arg} must be a dict or a tandem.model.{cls.__name__}, got "
            f"{type(value).__name__} {value!r:.80}."
        )
    allowed = [f.name for f in dataclasses.fields(cls)]
    unknown = [k for k in value if k not in allowed]
    if unknown:
        raise ConfigError(
            f"{arg} has unknown key{'s' if len(unknown) > 1 else ''} "
            f"{', '.join(repr(k) for k in unknown)}. Allowed keys: {', '.join(allowed)}."
        )
    return cls(**dict(value))


@dataclass(frozen=True)
class TrainSettings:
    """How ``model.train`` runs a model.

    Attributes:
        num_workers: workers in the gang (DDP across them).
        use_gpu: one GPU per worker (its ``CUDA_VISIBLE_DEVICES``); modules and batches go
            there.
        num_epochs: passes over the training data.
        batch_size: per worker.
        resources_per_worker: e.g. ``{"CPU": 2}``.
        checkpoint_every: a checkpoint every this many epochs (and always after the last).
        max_failures: gang restarts from the latest checkpoint after a worker failure
            (-1: unlimited).
        label_column: the label of DataFrame datasets.
        precision: "32", "bf16" or "16" (mixed precision through autocast; "16" scales the
            loss).
        seed: seeds each worker's torch RNG before ``setup()`` and the data order (None: one
            drawn per run, kept across restarts).
        on_nonfinite_loss: "raise" stops the run naming the epoch and batch; "skip" skips
            the optimizer step of a batch whose loss or gradients are not finite.
        shuffle: reshuffle each worker's training shard every epoch.
    """

    num_workers: int = 1
    use_gpu: bool = False
    num_epochs: int = 1
    batch_size: int = 32
    resources_per_worker: Mapping[str, float] | None = None
    checkpoint_every: int = 1
    max_failures: int = 0
    label_column: str | None = None
    precision: str = "32"
    seed: int | None = None
    on_nonfinite_loss: str = "raise"
    shuffle: bool = True

    def __post_init__(self) -> None:
        for name in ("num_workers", "num_epochs", "batch_size", "checkpoint_every"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(
                    f"TrainSettings({name}={v!r}): must be a whole number of at least 1."
                )
        if isinstance(self.max_failures, bool) or not isinstance(self.max_failures, int) \
                or self.max_failures < -1:
            raise ConfigError(
                f"TrainSettings(max_failures={self.max_failures!r}): a whole number, 0 for no "
                f"restarts or -1 for unlimited."
            )
        precision = _PRECISION_ALIASES.get(str(self.precision).lower())
        if precision is None:
            raise ConfigError(
                f"TrainSettings(precision={self.precision!r}): allowed are "
                f"{', '.join(repr(p) for p in PRECISIONS)} (also 'bf16-mixed', '16-mixed')."
            )
        object.__setattr__(self, "precision", precision)
        if self.on_nonfinite_loss not in NONFINITE:
            raise ConfigError(
                f"TrainSettings(on_nonfinite_loss={self.on_nonfinite_loss!r}): allowed are "
                f"'raise' and 'skip'."
            )
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ConfigError(f"TrainSettings(seed={self.seed!r}): a whole number or None.")
        if self.label_column is not None and not isinstance(self.label_column, str):
            raise ConfigError(
                f"TrainSettings(label_column={self.label_column!r}): the name of a column."
            )

    @classmethod
    def from_any(cls, value: object, arg: str = "train_settings") -> TrainSettings:
        """A ``TrainSettings`` from None, a dict (unknown keys are refused) or an instance."""
        return _from_any(cls, value, arg)

    def replace(self, **changes: Any) -> TrainSettings:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class TuneSettings:
    """How ``model.tune`` searches.

    Attributes:
        num_samples: configs to sample (times each grid point).
        metric / mode: what "best" means (default ``"loss"`` / ``"min"``).
        scheduler: a trial scheduler (e.g. ``ASHAScheduler()``); its metric and mode come
            from here when it has none.
        search_alg: a searcher (e.g. ``OptunaSearch()``).
        max_concurrent_trials: at most this many trials running at once.
    """

    num_samples: int = 1
    metric: str | None = None
    mode: str | None = None
    scheduler: Any = None
    search_alg: Any = None
    max_concurrent_trials: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.num_samples, bool) or not isinstance(self.num_samples, int) \
                or self.num_samples < 1:
            raise ConfigError(
                f"TuneSettings(num_samples={self.num_samples!r}): a whole number of at least 1."
            )
        if self.mode is not None and self.mode not in ("min", "max"):
            raise ConfigError(f"TuneSettings(mode={self.mode!r}): 'min' or 'max'.")

    @classmethod
    def from_any(cls, value: object, arg: str = "tune_settings") -> TuneSettings:
        return _from_any(cls, value, arg)
