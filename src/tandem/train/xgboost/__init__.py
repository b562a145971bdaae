"""tandem.train.xgboost: XGBoost trained by a gang of workers through XGBoost's collective.

    from tandem.train.xgboost import XGBoostTrainer, RayTrainReportCallback
"""

from tandem.train.xgboost.callback import RayTrainReportCallback, ReportCallback
from tandem.train.xgboost.checkpoint import XGBoostCheckpoint
from tandem.train.xgboost.trainer import XGBoostConfig, XGBoostTrainer

__all__ = [
    "RayTrainReportCallback",
    "ReportCallback",
    "XGBoostCheckpoint",
    "XGBoostConfig",
    "XGBoostTrainer",
]
