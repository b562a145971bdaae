"""What the boosted-tree trainers (XGBoost, LightGBM) share, one module a concern:

- ``data``: their datasets, what the driver checks and sends, how a worker loads its shard;
- ``collective``: the gang's own all-gather (for LightGBM and TensorFlow, which have none
  usable before their network starts; XGBoost uses ``xgboost.collective``), node address
  and free ports;
- ``trainer``: the params-form trainer base and the per-worker training;
- ``callbacks``: what both report callbacks share, and how workers' metrics combine.

The names below are re-exported for the libraries' modules.
"""

from __future__ import annotations

from tandem.train._internal.gbdt.callbacks import (
    ReportCallbackBase,
    combine_metrics,
    select_metrics,
)
from tandem.train._internal.gbdt.collective import GangLink, free_port, node_ip
from tandem.train._internal.gbdt.data import (
    FILE_FORMATS,
    FileSource,
    Pieces,
    concat_pieces,
    describe,
    features_and_label,
    head_xy,
    load_shard,
    split_pieces,
    to_frame,
    unify_categories,
    worker_datasets,
)
from tandem.train._internal.gbdt.trainer import (
    DEFAULT_CHECKPOINT_FREQUENCY,
    BoostedTreeTrainer,
    gpu_assigned,
    params_form_loop,
    train_rounds,
    worker_threads,
)

__all__ = [
    "DEFAULT_CHECKPOINT_FREQUENCY",
    "FILE_FORMATS",
    "BoostedTreeTrainer",
    "FileSource",
    "GangLink",
    "Pieces",
    "ReportCallbackBase",
    "combine_metrics",
    "concat_pieces",
    "describe",
    "features_and_label",
    "free_port",
    "gpu_assigned",
    "head_xy",
    "load_shard",
    "node_ip",
    "params_form_loop",
    "select_metrics",
    "split_pieces",
    "to_frame",
    "train_rounds",
    "unify_categories",
    "worker_datasets",
    "worker_threads",
]
