"""What the boosted-tree trainers (XGBoost, LightGBM) share: their datasets and how a
worker loads its shard, the params-form trainer base, and a small all-gather for ports.

Data a params-form trainer takes, per dataset name:

- a pandas DataFrame (``label_column`` names the label), a NumPy 2-D array (``label_column``
  is then a column index) or a tuple ``(X, y)``: split on the driver into one contiguous
  piece per worker; each worker is sent only its piece;
- a path, glob or fsspec URL (or a list of them) of parquet or CSV files: each worker reads
  only its share (its files; for fewer files than workers, its parquet row groups, or its
  rows of the file);
- a ``ray.data.Dataset`` (on Ray, split by Ray; elsewhere each worker keeps its rows).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tandem._core.errors import ConfigError
from tandem.train._internal import data as data_mod
from tandem.train.api.config import RunConfig
from tandem.train.api.trainer import DataParallelTrainer
from tandem.train.backends.base import BackendConfig

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


def describe(name: str, value: Any, num_workers: int, label_column: Any) -> Any:
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


def _is_paths(value: Any) -> bool:
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


def to_frame(name: str, value: Any, label_column: Any) -> Any:
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


def _parquet_file(path: str, options: Mapping[str, Any]) -> Any:
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


def head_xy(value: Any, label_column: Any, rows: int = 32) -> tuple[Any, Any] | None:
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


def worker_threads() -> int:
    """Threads this worker may use (its CPU share), 0 when not set."""
    return int(os.environ.get("TANDEM_NUM_THREADS", "0") or 0)


def node_ip() -> str:
    return os.environ.get("TANDEM_GBDT_NODE_IP") or "127.0.0.1"


# -- a small all-gather link across the gang (LightGBM's machine list and metrics) -------
class GangLink:
    """Rank 0 serves a socket whose address reaches the other ranks through the driver's
    rendezvous; every rank keeps one connection to it for the gang's life. ``allgather``
    gives every rank's JSON value in rank order."""

    def __init__(self, rank: int, world: int, timeout_s: float = 120.0) -> None:
        from tandem.train.session import get_session

        self.rank, self.world = rank, world
        self._conns: list[Any] = []
        if world == 1:
            return
        session = get_session()
        if session is None:
            raise RuntimeError("GangLink runs inside tandem workers only")
        if rank == 0:
            srv = socket.create_server((node_ip(), 0))
            srv.settimeout(timeout_s)
            try:
                session.call("rendezvous_set", [node_ip(), srv.getsockname()[1]])
                by_rank: dict[int, Any] = {}
                for _ in range(world - 1):
                    conn, _ = srv.accept()
                    conn.settimeout(timeout_s)
                    f = conn.makefile("rwb")
                    by_rank[int(json.loads(f.readline()))] = (conn, f)
            finally:
                srv.close()
            self._conns = [by_rank[r] for r in sorted(by_rank)]
        else:
            host, port = session.call("rendezvous_get", None, timeout_s=timeout_s)
            conn = socket.create_connection((host, port), timeout=timeout_s)
            conn.settimeout(None)
            f = conn.makefile("rwb")
            f.write(f"{rank}\n".encode())
            f.flush()
            self._conns = [(conn, f)]

    def allgather(self, value: Any) -> list[Any]:
        if self.world == 1:
            return [value]
        if self.rank == 0:
            values = [value]
            for _, f in self._conns:
                line = f.readline()
                if not line:
                    raise ConnectionError("a peer left the gang during an all-gather")
                values.append(json.loads(line))
            out = (json.dumps(values) + "\n").encode()
            for _, f in self._conns:
                f.write(out)
                f.flush()
            return values
        (_, f), = self._conns
        f.write((json.dumps(value) + "\n").encode())
        f.flush()
        line = f.readline()
        if not line:
            raise ConnectionError("rank 0 left the gang during an all-gather")
        return list(json.loads(line))

    def close(self) -> None:
        for conn, f in self._conns:
            for c in (f, conn):
                try:
                    c.close()
                except OSError:
                    pass
        self._conns = []


def combine_metrics(per_rank: list[tuple[dict[str, float], dict[str, int]]]) -> dict[str, float]:
    """Workers' metrics (each on its own rows) as one value per key: the row-weighted mean
    (root-mean-square for rmse). Exact for mean-type metrics (logloss, error, l1, l2)."""
    import math

    out: dict[str, float] = {}
    for key in per_rank[0][0]:
        data, _, metric = key.partition("-")
        num = den = 0.0
        root = metric in ("rmse", "l2_root", "root_mean_squared_error")
        for metrics, rows in per_rank:
            if key not in metrics:
                continue
            w = float(rows.get(data, 1))
            v = float(metrics[key])
            num += w * (v * v if root else v)
            den += w
        if den:
            out[key] = math.sqrt(num / den) if root else num / den
    return out


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


# -- the params-form trainer base ----------------------------------------------------------
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

    def __init__(
        self,
        train_loop_per_worker: Any = None,
        *,
        train_loop_config: Mapping[str, Any] | None = None,
        params: Mapping[str, Any] | None = None,
        label_column: Any = None,
        num_boost_round: int | None = None,
        datasets: Mapping[str, Any] | None = None,
        backend_config: BackendConfig | None = None,
        scaling_config: Any = None,
        run_config: RunConfig | None = None,
        dataset_config: Any = None,
        resume_from_checkpoint: Any = None,
        metadata: Mapping[str, Any] | None = None,
        **library_config: Any,
    ) -> None:
        name = type(self).__name__
        for key in library_config:
            if key != self.config_keyword:
                raise TypeError(f"{name}() got an unexpected keyword argument {key!r}")
        if library_config.get(self.config_keyword) is not None and backend_config is None:
            backend_config = library_config[self.config_keyword]
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
            )
            return
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
        from tandem.train.api.config import ScalingConfig

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
    def _params_form_fn(self) -> Any:
        """The per-worker function of the params form (module level: it is pickled)."""
        raise NotImplementedError

    @classmethod
    def report_callback_class(cls) -> Any:
        """The library's ``RayTrainReportCallback``."""
        raise NotImplementedError

    @classmethod
    def rounds_in(cls, booster: Any) -> int:
        """Boosting rounds a loaded booster holds."""
        raise NotImplementedError

    @classmethod
    def unify_categories(cls, shards: dict[str, Any]) -> None:
        """Gives category columns the same categories on every worker (see
        ``unify_categories``), through the library's collective."""
        raise NotImplementedError

    @classmethod
    def train_booster(cls, params: Mapping[str, Any], splits: Mapping[str, Any], rounds: int,
                      start: Any, callback: Any) -> None:
        """Trains ``rounds`` more rounds on this worker's ``splits`` (``{name: (X, y)}``,
        "train" first) from ``start`` (a booster or None), reporting through
        ``callback``."""
        raise NotImplementedError

    @classmethod
    def _probe(cls, params: Mapping[str, Any], head: tuple[Any, Any]) -> str | None:
        """The library's message when it rejects ``params`` on a few rows, else None."""
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    def _check_params(self, params: dict[str, Any], described: Mapping[str, Any],
                      label_column: Any) -> None:
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
    def train_rounds(cls, params: Mapping[str, Any], splits: Mapping[str, Any], total: int,
                     **kwargs: Any) -> None:
        """Inside a worker: trains up to round ``total`` on this worker's ``splits``
        (``{name: (X, y)}``, "train" first), resuming from the run's checkpoint; see
        ``train_rounds``. The model layer's tree models train through this."""
        train_rounds(cls, params, splits, total, **kwargs)

    @classmethod
    def get_model(cls, checkpoint: Any, filename: str | None = None) -> Any:
        """The booster saved in a checkpoint of this trainer (e.g. ``result.checkpoint``);
        ``filename`` if it was saved under another name than the callback's default."""
        return cls.report_callback_class().get_model(checkpoint, filename)


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


def unify_categories(shards: Mapping[str, Any], allgather: Any) -> None:
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


# -- what both libraries' report callbacks share --------------------------------------------


def select_metrics(flat: dict[str, float],
                   metrics: str | list[str] | dict[str, str] | None) -> dict[str, float]:
    """All of ``flat``, or only the asked-for keys (a dict renames ``{reported: library
    key}``)."""
    if metrics is None:
        return flat
    wanted = {metrics: metrics} if isinstance(metrics, str) else (
        dict(metrics) if isinstance(metrics, Mapping) else {m: m for m in metrics})
    return {out: flat[key] for out, key in wanted.items() if key in flat}


class ReportCallbackBase:
    """The part of ``RayTrainReportCallback`` that does not depend on the library: which
    metrics, the checkpoint's files, and the order of the ranks' reports on a checkpoint
    round. A library's callback says how a booster is saved and loaded and when a round
    ends.

    Args:
        metrics: which metrics to report (a key, a list, or ``{name: library key}``); all
            by default.
        filename: the booster's file name in the checkpoint.
        frequency: checkpoint every this many rounds (0: only at the end).
        checkpoint_at_end: checkpoint after the last round.
        results_postprocessing_fn: maps the metrics dict before it is reported.
        extra_files: more files (name -> bytes) written into every checkpoint.
    """

    CHECKPOINT_NAME = "model"
    library = "?"

    def __init__(
        self,
        metrics: str | list[str] | dict[str, str] | None = None,
        filename: str | None = None,
        frequency: int = 0,
        checkpoint_at_end: bool = True,
        results_postprocessing_fn: Any = None,
        extra_files: Mapping[str, bytes] | None = None,
    ) -> None:
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 0:
            raise ValueError(f"frequency={frequency!r}: give a whole number of rounds >= 0.")
        self._metrics = metrics
        self._filename = filename or self.CHECKPOINT_NAME
        self._frequency = frequency
        self._checkpoint_at_end = checkpoint_at_end
        self._post = results_postprocessing_fn
        self._extra = dict(extra_files or {})

    # -- a library's part ------------------------------------------------------------------
    @classmethod
    def load_booster(cls, path: str) -> Any:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------
    @classmethod
    def get_model(cls, checkpoint: Any, filename: str | None = None) -> Any:
        """The booster saved in ``checkpoint`` by this callback."""
        filename = filename or cls.CHECKPOINT_NAME
        with checkpoint.as_directory() as d:
            path = os.path.join(d, filename)
            if not os.path.exists(path):
                raise FileNotFoundError(
                    f"{checkpoint!r} holds no {filename!r} (it has "
                    f"{sorted(os.listdir(d))}); was it written by the {cls.library} report "
                    f"callback? Pass filename= if it was saved under another name."
                )
            return cls.load_booster(path)

    def _report_metrics(self, flat: dict[str, float]) -> dict[str, float]:
        metrics = select_metrics(flat, self._metrics)
        return self._post(metrics) if self._post is not None else metrics

    def _due(self, iteration: int) -> bool:
        """A checkpoint is due after round ``iteration`` (counted from 1)."""
        return bool(self._frequency) and iteration % self._frequency == 0

    @staticmethod
    def _rank() -> int:
        from tandem.train.session import get_context

        return get_context().world_rank

    def _save(self, booster: Any) -> str | None:
        """Rank 0 writes the booster (the same on every rank) and the extra files into a
        temporary folder; the other ranks write nothing."""
        if self._rank() != 0:
            return None
        import tempfile

        d = tempfile.mkdtemp(prefix=f"tandem-{self.library.lower()}-")
        booster.save_model(os.path.join(d, self._filename))
        for name, blob in self._extra.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(blob)
        return d

    def _deliver(self, metrics: dict[str, float], checkpoint_round: bool, ckpt_dir: str | None,
                 barrier: Any) -> None:
        """Reports one round. On a checkpoint round of a gang, the other ranks report before
        rank 0 does (``barrier`` in between), so that the checkpoint is complete
        (committable) when rank 0's report arrives, even if the run is stopped right after
        it (a tuner's scheduler at max_t)."""
        import shutil

        from tandem.train.api.checkpoint import Checkpoint
        from tandem.train.session import report

        try:
            if checkpoint_round and barrier is not None:
                rank = self._rank()
                if rank != 0:
                    report(metrics)
                barrier()
                if rank != 0:
                    return
            report(metrics, checkpoint=Checkpoint.from_directory(ckpt_dir)
                         if ckpt_dir else None)
        finally:
            if ckpt_dir:
                shutil.rmtree(ckpt_dir, ignore_errors=True)


# -- the per-worker training both libraries share ------------------------------------------
def train_rounds(trainer_cls: Any, params: Mapping[str, Any], splits: Mapping[str, Any],
                 total: int, *, announce: bool = True, numbered: bool = False,
                 **callback_kwargs: Any) -> None:
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


def params_form_loop(trainer_cls: Any, config: Mapping[str, Any]) -> None:
    """The per-worker function of a params-form trainer."""
    shards = worker_datasets(config)
    trainer_cls.unify_categories(shards)
    label = config["label_column"]
    splits = {name: features_and_label(s, label) for name, s in shards.items()}
    train_rounds(trainer_cls, config["params"], splits, int(config["num_boost_round"]),
                 frequency=config["checkpoint_frequency"],
                 checkpoint_at_end=config["checkpoint_at_end"])


def gpu_assigned() -> bool:
    """Whether the gang gave this worker a GPU (tandem sets ``CUDA_VISIBLE_DEVICES`` to the
    worker's GPUs, empty for none)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    return visible is not None and visible.strip() not in ("", "-1", "NoDevFiles")
