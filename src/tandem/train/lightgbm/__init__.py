"""tandem.train.lightgbm: LightGBM trained by a gang of workers through LightGBM's network.

    from tandem.train.lightgbm import LightGBMTrainer, RayTrainReportCallback
"""

from tandem.train.lightgbm.callback import RayTrainReportCallback, ReportCallback
from tandem.train.lightgbm.checkpoint import LightGBMCheckpoint, normalize_pandas_for_lightgbm
from tandem.train.lightgbm.trainer import LightGBMConfig, LightGBMTrainer, get_network_params

__all__ = [
    "LightGBMCheckpoint",
    "LightGBMConfig",
    "LightGBMTrainer",
    "RayTrainReportCallback",
    "ReportCallback",
    "get_network_params",
    "normalize_pandas_for_lightgbm",
]
