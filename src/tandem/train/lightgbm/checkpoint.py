"""``LightGBMCheckpoint``: a ``Checkpoint`` holding a LightGBM booster (Ray's; deprecated
there in favour of ``Checkpoint``, kept for programs that use it)."""

from __future__ import annotations

from typing import Any

from tandem.train._framework_checkpoint import FrameworkCheckpoint

__all__ = ["LightGBMCheckpoint"]


class LightGBMCheckpoint(FrameworkCheckpoint):
    """A checkpoint folder with ``model.txt``, a ``lightgbm.Booster``."""

    MODEL_FILENAME = "model.txt"

    @classmethod
    def from_model(cls, booster: Any, *, preprocessor: object = None,
                   path: str | None = None) -> LightGBMCheckpoint:
        """Saves ``booster`` into ``path`` (an empty folder; a new temporary one if None)."""
        checkpoint_path = cls._new_dir(path)
        booster.save_model(checkpoint_path.joinpath(cls.MODEL_FILENAME).as_posix())
        return cls._finish(checkpoint_path, preprocessor)

    def get_model(self) -> Any:
        """The ``lightgbm.Booster`` this checkpoint holds."""
        import lightgbm

        with self.as_directory() as d:
            return lightgbm.Booster(model_file=self._model_path(d))


def normalize_pandas_for_lightgbm(df: Any) -> Any:
    """Maps Arrow-backed numeric/boolean pandas dtypes (``int64[pyarrow]``...) to NumPy
    nullable ones, which LightGBM accepts (Ray's helper); other columns are unchanged."""
    import pandas as pd
    import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

    mapping: dict[Any, str] = {}
    for column, dtype in df.dtypes.items():
        if not isinstance(dtype, pd.ArrowDtype):
            continue
        arrow = dtype.pyarrow_dtype
        if pa.types.is_signed_integer(arrow):
            mapping[column] = f"Int{arrow.bit_width}"
        elif pa.types.is_unsigned_integer(arrow):
            mapping[column] = f"UInt{arrow.bit_width}"
        elif pa.types.is_floating(arrow):
            mapping[column] = f"Float{arrow.bit_width}"
        elif pa.types.is_boolean(arrow):
            mapping[column] = "boolean"
    if mapping:
        df = df.astype(mapping)
    return df
