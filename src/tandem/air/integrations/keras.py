"""Ray's ``ray.air.integrations.keras``: ``ReportCheckpointCallback``, a Keras callback that
reports Keras' logs (and a checkpoint of the model) through ``tandem.train.report``.

It lives in ``tandem.train.tensorflow.keras`` (Ray's other path for it). Importing this
module imports TensorFlow: import it in the train function, or in a script that uses
TensorFlow anyway.
"""

from __future__ import annotations

from tandem.train.tensorflow.keras import ReportCheckpointCallback, check_model_in_strategy_scope

__all__ = ["ReportCheckpointCallback", "check_model_in_strategy_scope"]
