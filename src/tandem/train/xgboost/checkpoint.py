"""``XGBoostCheckpoint``: a ``Checkpoint`` holding an XGBoost booster (Ray's; deprecated
there in favour of ``Checkpoint``, kept for programs that use it)."""

from __future__ import annotations

from typing import Any

from tandem.train._framework_checkpoint import FrameworkCheckpoint

__all__ = ["XGBoostCheckpoint"]


class XGBoostCheckpoint(FrameworkCheckpoint):
    """A checkpoint folder with ``model.json``, an ``xgboost.Booster``."""

    MODEL_FILENAME = "model.json"

    @classmethod
    def from_model(cls, booster: Any, *, preprocessor: object = None,
                   path: str | None = None) -> XGBoostCheckpoint:
        """Saves ``booster`` into ``path`` (an empty folder; a new temporary one if None)."""
        checkpoint_path = cls._new_dir(path)
        booster.save_model(checkpoint_path.joinpath(cls.MODEL_FILENAME).as_posix())
        return cls._finish(checkpoint_path, preprocessor)

    def get_model(self) -> Any:
        """The ``xgboost.Booster`` this checkpoint holds."""
        import xgboost

        with self.as_directory() as d:
            booster = xgboost.Booster()
            booster.load_model(self._model_path(d))
            return booster
