"""A boosted-tree trainer's datasets: what the driver checks and sends, and how each worker
loads its shard.

Data a params-form trainer takes, per dataset name:

- a pandas DataFrame (``label_column`` names the label), a NumPy 2-D array (``label_column``
  is then a column index) or a tuple ``(X, y)``: split on the driver into one contiguous
  piece per worker; each worker is sent only its piece;
- a path, glob or fsspec URL (or a list of them) of parquet or CSV files: each worker reads
  only its share (its files; for fewer files than workers, its parquet row groups, or its
  rows of the file);
- a ``ray.data.Dataset`` (on Ray, split by Ray; elsewhere each worker keeps its rows).

Category columns get the same categories on every worker (``unify_categories``) through an
all-gather the library's collective provides.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tandem._core.errors import ConfigError
from tandem.train._internal import data as data_mod

FILE_FORMATS = ("parquet", "csv")


# -- dataset descriptions ------------------------------------------------------------------
@dataclass(frozen=True)
class FileSource:
    """Parquet or CSV files named by path, glob or fsspec URL; read in the workers."""

    paths: tuple[str, ...]
    fmt: str
    storage_options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pieces:
    """An in-memory dataset already split into one piece per worker (no row dropped)."""

    pieces: tuple[Any, ...]
    total_rows: int


def _file_format(path: str) -> str | None:
    p = path.lower().split("?")[0]
    for suffix in (".gz", ".bz2", ".zst", ".xz", ".zip"):
        p = p.removesuffix(suffix)
    if p.endswith((".parquet", ".pq")):
        return "parquet"
    if p.endswith((".csv", ".tsv", ".txt")):
        return "csv"
    return None


def _expand_paths(paths: Sequence[str]) -> list[str]:
    import fsspec

    out: list[str] = []
    for p in paths:
        fs, _, found = fsspec.get_fs_token_paths(p)
        if not found and fs.isdir(p):
            found = []
        proto = fs.protocol[0] if isinstance(fs.protocol, (tuple, list)) else fs.protocol
        if len(found) == 1 and fs.isdir(found[0]):
            found = sorted(x for x in fs.find(found[0]) if _file_format(x))
        if not found:
            raise ConfigError(
                f"datasets: no file matches {p!r}. Give an existing parquet/CSV file, a folder "
                f"of them, a glob such as 'data/*.parquet', or an fsspec URL."
            )
        prefix = "" if proto in ("file", "local") else f"{proto}://"
        out.extend(f if "://" in f or not prefix else prefix + f for f in sorted(found))
    return out


def describe(name: str, value: Any, num_workers: int, label_column: object) -> Any:
    """The form of ``datasets[name]`` a params-form trainer sends to its workers; checks the
    label column, column types and row count on the driver (before any worker starts).
    In-memory data is split into one piece per worker; a tuning trial with fewer workers
    (a divisor of ``num_workers``) gives each worker a run of consecutive pieces."""
    if _is_paths(value):
        paths = [os.fspath(v) for v in ([value] if isinstance(value, (str, os.PathLike))
                                        else value)]
        files = _expand_paths(paths)
        fmts = {_file_format(f) for f in files}
        if len(fmts) != 1 or None in fmts:
            raise ConfigError(
                f"datasets[{name!r}]: cannot tell the format of {files[:3]}; tandem reads "
                f"files ending in .parquet/.pq or .csv (optionally compressed). Rename them, "
                f"or load them yourself into a pandas DataFrame."
            )
        src = FileSource(tuple(files), fmts.pop() or "parquet")
        _check_columns(name, _head(src, 0), label_column, path=src.paths[0])
        if src.fmt == "parquet":
            rows = _parquet_rows(src)
            _check_rows(name, rows, num_workers)
        return src
    if data_mod.is_ray_dataset(value):
        cols = value.columns() if hasattr(value, "columns") else None
        if cols is not None and label_column is not None and label_column not in cols:
            raise ConfigError(
                f"label_column={label_column!r} is not a column of datasets[{name!r}]; its "
                f"columns are {list(cols)}. Pass the name of the label column."
            )
        return value
    frame = to_frame(name, value, label_column)
    _check_columns(name, frame, label_column)
    _check_rows(name, len(frame), num_workers)
    return split_pieces(value, num_workers)


def _is_paths(value: object) -> bool:
    return isinstance(value, (str, os.PathLike)) or (
        isinstance(value, (list, tuple)) and bool(value)
        and all(isinstance(v, (str, os.PathLike)) for v in value))


def split_pieces(value: Any, n: int) -> Pieces:
    """``n`` contiguous pieces whose sizes differ by at most one row."""
    if isinstance(value, tuple) and len(value) == 2:
        xs, ys = split_pieces(value[0], n), split_pieces(value[1], n)
        return Pieces(tuple(zip(xs.pieces, ys.pieces)), xs.total_rows)
    total = len(value)
    bounds = [(r * total // n, (r + 1) * total // n) for r in range(n)]
    module = type(value).__module__
    if module.startswith("pandas"):
        return Pieces(tuple(value.iloc[a:b] for a, b in bounds), total)
    if module.startswith("pyarrow"):
        return Pieces(tuple(value.slice(a, b - a).to_pandas() for a, b in bounds), total)
    return Pieces(tuple(value[a:b] for a, b in bounds), total)


def _check_rows(name: str, rows: int, num_workers: int) -> None:
    if rows < num_workers:
        raise ConfigError(
            f"datasets[{name!r}] has {rows} rows but scaling_config asks for {num_workers} "
            f"workers: each worker needs at least one row. Use num_workers <= {rows}, or "
            f"more data."
        )


def to_frame(name: str, value: Any, label_column: object) -> Any:
    """A pandas DataFrame view of an in-memory dataset (for the driver's checks)."""
    import pandas as pd

    if isinstance(value, pd.DataFrame):
        return value
    if isinstance(value, tuple) and len(value) == 2:
        x, y = value
        frame = pd.DataFrame(x) if not isinstance(x, pd.DataFrame) else x.copy()
        frame["__label__"] = list(y) if not hasattr(y, "__array__") else y
        return frame
    module = type(value).__module__
    if module.startswith("numpy"):
        if getattr(value, "ndim", 0) != 2:
            raise ConfigError(
                f"datasets[{name!r}] is a NumPy array of shape {value.shape}; give a 2-D array "
                f"(rows x columns) with label_column as the label's column index, a tuple "
                f"(X, y), or a pandas DataFrame."
            )
        return pd.DataFrame(value)
    if module.startswith("pyarrow"):
        return value.to_pandas()
    raise ConfigError(
        f"datasets[{name!r}] is a {module}.{type(value).__name__}; boosted-tree trainers take "
        f"a pandas DataFrame, a 2-D NumPy array, a tuple (X, y), parquet/CSV paths or URLs, "
        f"or a ray.data.Dataset on Ray."
    )


def _check_columns(name: str, frame: Any, label_column: Any, path: str | None = None) -> None:
    import pandas as pd

    if "__label__" in frame.columns:
        label_column = "__label__"
    if label_column is None:
        raise ConfigError(
            f"label_column is required with datasets[{name!r}] (a table); pass "
            f"label_column='<name of the label column>', or give datasets as tuples (X, y)."
        )
    if label_column not in frame.columns:
        raise ConfigError(
            f"label_column={label_column!r} is not a column of datasets[{name!r}]; its "
            f"columns are {list(frame.columns)[:20]}. Pass the name of the label column."
        )
    bad = [str(c) for c in frame.columns if c != label_column and not (
        pd.api.types.is_numeric_dtype(frame[c]) or pd.api.types.is_bool_dtype(frame[c])
        or isinstance(frame[c].dtype, pd.CategoricalDtype))]
    if not bad:
        return
    col, dtype = bad[0], frame[bad[0]].dtype
    if path is None:
        raise ConfigError(
            f"datasets[{name!r}]: column(s) {bad} are not numeric ({dtype}); boosted trees "
            f"take numbers, booleans and pandas categories. Convert them, e.g. "
            f"df[{col!r}] = df[{col!r}].astype('category'), or drop them."
        )
    # text in a file: tandem does not guess categories from text (every worker would see
    # other values, and the model's categories must be those of the data it will predict)
    reader = "read_parquet" if _file_format(path) == "parquet" else "read_csv"
    raise ConfigError(
        f"datasets[{name!r}]: column(s) {bad} are not numeric: text ({dtype}) in {path}; "
        f"boosted trees take numbers, booleans and categories. Read the file yourself with "
        f"the column as a category, df = pd.{reader}({path!r}"
        + (f", dtype={{{col!r}: 'category'}})" if reader == "read_csv" else
           f"); df[{col!r}] = df[{col!r}].astype('category')")
        + ", and pass df; or store the column as a category in parquet (pandas writes it "
        "dictionary-encoded; tandem reads that back as a category); or drop the column."
    )


def _parquet_file(path: str, options: Mapping[str, object]) -> Any:
    import fsspec
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    fs, _, (p,) = fsspec.get_fs_token_paths(path, storage_options=dict(options))
    return pq.ParquetFile(fs.open(p, "rb"))


def _parquet_rows(src: FileSource) -> int:
    return sum(_parquet_file(f, src.storage_options).metadata.num_rows for f in src.paths)


def _read_file(path: str, src: FileSource, row_groups: Sequence[int] | None = None) -> Any:
    import fsspec
    import pandas as pd

    if src.fmt == "parquet":
        pf = _parquet_file(path, src.storage_options)
        table = pf.read_row_groups(list(row_groups)) if row_groups is not None else pf.read()
        return _arrow_to_pandas(table)
    with fsspec.open(path, "rb", compression="infer", **dict(src.storage_options)) as f:
        return pd.read_csv(f, sep="\t" if path.lower().endswith(".tsv") else ",")


def _arrow_to_pandas(table: Any) -> Any:
    """A DataFrame whose dictionary-encoded (categorical) columns are pandas categories."""
    import pandas as pd
    import pyarrow as pa

    frame = table.to_pandas()
    for f in table.schema:
        if pa.types.is_dictionary(f.type) and not isinstance(frame[f.name].dtype,
                                                              pd.CategoricalDtype):
            frame[f.name] = frame[f.name].astype("category")
    return frame


def _head(src: FileSource, rows: int) -> Any:
    """The first ``rows`` rows of the first file (0 = only the columns and their types)."""
    import fsspec
    import pandas as pd

    path = src.paths[0]
    if src.fmt == "parquet":
        pf = _parquet_file(path, src.storage_options)
        batch = next(pf.iter_batches(batch_size=max(rows, 1)), None)
        frame = _arrow_to_pandas(batch if batch is not None else pf.schema_arrow.empty_table())
        return frame.head(rows) if rows else frame.head(0)
    with fsspec.open(path, "rb", compression="infer", **dict(src.storage_options)) as f:
        # enough rows for pandas to infer column types, then keep the asked-for head
        frame = pd.read_csv(f, nrows=max(rows, 100))
    return frame.head(rows)


def load_shard(value: Any, rank: int, world: int) -> Any:
    """This worker's rows (a DataFrame, array or (X, y)) of one described dataset."""
    import pandas as pd

    if isinstance(value, Pieces):
        n = len(value.pieces)
        if n % world:
            raise ConfigError(
                f"this dataset was split into {n} pieces when the trainer was built, which "
                f"{world} workers cannot share. Build the trainer with num_workers a multiple "
                f"of every count you tune, or give the data as parquet/CSV files."
            )
        per = n // world
        return concat_pieces(value.pieces[rank * per:(rank + 1) * per])
    if isinstance(value, FileSource):
        files = list(value.paths)
        if len(files) >= world:
            mine = files[rank::world]
            return _concat([_read_file(f, value) for f in mine])
        if value.fmt == "parquet" and len(files) == 1:
            groups = _parquet_file(files[0], value.storage_options).metadata.num_row_groups
            if groups >= world:
                return _read_file(files[0], value, list(range(rank, groups, world)))
        whole = _concat([_read_file(f, value) for f in files])
        n = len(whole)
        return whole.iloc[rank * n // world:(rank + 1) * n // world]
    if data_mod.is_ray_dataset(value):
        if hasattr(value, "iter_batches") and not hasattr(value, "streaming_split"):
            # a DataIterator: Ray already split it for this worker
            batches = list(value.iter_batches(batch_format="pandas", batch_size=None))
            return pd.concat(batches, ignore_index=True) if batches else pd.DataFrame()
        whole = value.to_pandas()
        n = len(whole)
        return whole.iloc[rank * n // world:(rank + 1) * n // world]
    return value


def concat_pieces(pieces: Sequence[Any]) -> Any:
    """One worker's run of consecutive pieces (DataFrames, arrays or ``(X, y)``) as one."""
    first = pieces[0]
    if len(pieces) == 1:
        return first
    if isinstance(first, tuple):
        return tuple(concat_pieces([p[i] for p in pieces]) for i in range(len(first)))
    module = type(first).__module__
    if module.startswith("pandas"):
        import pandas as pd

        return pd.concat(list(pieces))
    import numpy as np

    return np.concatenate(list(pieces))


def _concat(frames: list[Any]) -> Any:
    """``pd.concat`` that keeps category columns categories (their union) when the files
    hold different values."""
    import pandas as pd

    if len(frames) > 1:
        parts = {str(i): f for i, f in enumerate(frames)}
        unify_categories(parts, lambda cols: [cols])
        frames = [parts[str(i)] for i in range(len(frames))]
    return pd.concat(frames, ignore_index=True)


def features_and_label(shard: Any, label_column: Any) -> tuple[Any, Any]:
    """``(X, y)`` of a loaded shard."""
    if isinstance(shard, tuple) and len(shard) == 2:
        return shard
    module = type(shard).__module__
    if module.startswith("numpy"):
        import numpy as np

        col = int(label_column)
        return np.delete(shard, col, axis=1), shard[:, col]
    return shard.drop(columns=[label_column]), shard[label_column]


def head_xy(value: object, label_column: object, rows: int = 32) -> tuple[Any, Any] | None:
    """A few rows of a described dataset for the driver's params check (None for Ray)."""
    if isinstance(value, Pieces):
        first = value.pieces[0]
        if isinstance(first, tuple):
            return first[0][:rows], first[1][:rows]
        return features_and_label(first[:rows] if not hasattr(first, "iloc")
                                  else first.iloc[:rows], label_column)
    if isinstance(value, FileSource):
        return features_and_label(_head(value, rows), label_column)
    return None


def worker_datasets(config: Mapping[str, Any]) -> dict[str, Any]:
    """Inside a params-form worker: this worker's shard of every dataset, by name."""
    from tandem.train.session import get_context, get_dataset_shard

    ctx = get_context()
    out: dict[str, Any] = {}
    for name, (kind, src) in config["datasets"].items():
        if kind == "files":
            out[name] = load_shard(src, ctx.world_rank, ctx.world_size)
        elif kind == "pieces":
            got = get_dataset_shard(name)
            if not got or src % ctx.world_size:
                raise ConfigError(
                    f"datasets[{name!r}] was split into {src} pieces, one per worker of the "
                    f"trainer's scaling_config, which {ctx.world_size} workers cannot share "
                    f"(a Tuner's param_space sets num_workers?). Build the trainer with "
                    f"num_workers a multiple of every count you tune (e.g. "
                    f"ScalingConfig(num_workers=4) to try 1, 2 and 4 workers), or give the "
                    f"data as parquet/CSV files, which each worker reads its share of."
                )
            out[name] = got[0] if len(got) == 1 else concat_pieces(got)
        else:
            out[name] = load_shard(get_dataset_shard(name), ctx.world_rank, ctx.world_size)
    return out


def unify_categories(shards: Mapping[str, object], allgather: Any) -> None:
    """Gives every category column the same categories, in the same order, on every worker
    (a worker's file may lack some values; codes must mean the same everywhere). Rank 0's
    order first, then values only other workers saw, sorted."""
    import pandas as pd

    cols: dict[str, list[Any]] = {}
    for shard in shards.values():
        if isinstance(shard, pd.DataFrame):
            for c in shard.columns:
                if isinstance(shard[c].dtype, pd.CategoricalDtype):
                    seen = cols.setdefault(str(c), [])
                    seen.extend(v for v in shard[c].cat.categories.tolist() if v not in seen)
    everyone = allgather(cols)
    if not any(everyone):
        return
    merged: dict[str, list[Any]] = {}
    for rank_cols in everyone:
        for c, cats in rank_cols.items():
            have = merged.setdefault(c, [])
            extra = [v for v in cats if v not in have]
            have.extend(extra if not have else sorted(extra, key=str))
    for shard in shards.values():
        if isinstance(shard, pd.DataFrame):
            for c, cats in merged.items():
                if (c in shard.columns and isinstance(shard[c].dtype, pd.CategoricalDtype)
                        and shard[c].cat.categories.tolist() != cats):
                    shard[c] = shard[c].cat.set_categories(cats)
