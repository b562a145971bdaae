"""Experiments and runs on disk, as the dashboard shows them.

An *experiment* is a folder holding ``experiment_state.json`` (written by the Tuner) and one
folder per trial; a *run* is a folder holding ``result.json`` (one JSON line per report).
``ResultsIndex`` finds them under some roots (``~/tandem_results`` by default, or the run
folders of the server's jobs) and reads them; pages name them by an id (a hash of the
path), so no request can make it read a path it did not find itself.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

STATE_FILE = "experiment_state.json"
RESULT_FILE = "result.json"
PARAMS_FILE = "params.json"
ERROR_FILE = "error.txt"
MAX_POINTS = 2000  # per curve; longer ones are thinned evenly
CURVES_SENT = 50  # an experiment sends the curves of its best trials (and decided ones)
MAX_LOG_BYTES = 1 << 20
SCAN_TTL_S = 2.0


def trial_state(trial: Mapping[str, object]) -> str:
    """The state the dashboard shows for a trial record of ``experiment_state.json``: the
    trial's own, in Ray Tune's words (``TERMINATED``, ``ERROR``, ``PAUSED``, ...), the words
    ``tandem jobs list`` names a trial's job with (``tandem.server.vocabulary``)."""
    return str(trial.get("status") or "?")


def path_id(path: str) -> str:
    return hashlib.sha1(os.path.abspath(path).encode()).hexdigest()[:16]


def _read_json(path: str) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


_ROWS_CACHE: OrderedDict[tuple[str, int], tuple[float, int, list[dict[str, Any]]]] = \
    OrderedDict()
_ROWS_CACHE_LOCK = threading.Lock()
ROWS_CACHED = 20_000


def read_rows(run_path: str, max_points: int = MAX_POINTS) -> list[dict[str, Any]]:
    """The reports of a run (``result.json``), numeric values only, thinned to
    ``max_points`` (the last row is always kept). Cached while the file is unchanged."""
    try:
        st = os.stat(os.path.join(run_path, RESULT_FILE))
    except OSError:
        return []
    key = (run_path, max_points)
    with _ROWS_CACHE_LOCK:
        hit = _ROWS_CACHE.get(key)
        if hit is not None and hit[0] == st.st_mtime and hit[1] == st.st_size:
            _ROWS_CACHE.move_to_end(key)
            return hit[2]
    rows = _read_rows(run_path, max_points)
    with _ROWS_CACHE_LOCK:
        _ROWS_CACHE[key] = (st.st_mtime, st.st_size, rows)
        while len(_ROWS_CACHE) > ROWS_CACHED:
            _ROWS_CACHE.popitem(last=False)
    return rows


def _read_rows(run_path: str, max_points: int) -> list[dict[str, object]]:
    rows: list[dict[str, Any]] = []
    try:
        with open(os.path.join(run_path, RESULT_FILE), encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line:
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line being written right now
                if isinstance(row, dict):
                    rows.append({k: v for k, v in row.items() if _is_num(v)})
    except OSError:
        return []
    if len(rows) > max_points:
        step = len(rows) / max_points
        keep = [rows[int(i * step)] for i in range(max_points - 1)]
        rows = keep + [rows[-1]]
    return rows


def _is_num(v: object) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(float(v)))


def flatten(d: object, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a/b": 1}``; values that are not scalars become text."""
    out: dict[str, Any] = {}
    if not isinstance(d, dict):
        return out
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            out.update(flatten(v, key + "/"))
        elif isinstance(v, (int, float, str, bool)) or v is None:
            out[key] = v
        else:
            out[key] = repr(v)[:80]
    return out


def checkpoints(run_path: str, rows: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """``checkpoint_NNNNNN`` folders of a run with the metrics reported with them (the
    report whose ``training_iteration`` is NNNNNN)."""
    try:
        names = sorted(n for n in os.listdir(run_path) if n.startswith("checkpoint_"))
    except OSError:
        return []
    by_iter = {int(r["training_iteration"]): r for r in (rows or [])
               if "training_iteration" in r}
    out = []
    for n in names:
        full = os.path.join(run_path, n)
        if not os.path.isdir(full):
            continue
        try:
            it = int(n.split("_", 1)[1])
        except ValueError:
            it = None
        out.append({"path": full, "iteration": it,
                    "metrics": by_iter.get(it, {}) if it is not None else {},
                    "time": os.path.getmtime(full)})
    return out


def read_logs(run_path: str, limit: int = MAX_LOG_BYTES) -> dict[str, str]:
    """The last ``limit`` bytes of each rank's log (``logs/rank_N.log``)."""
    out: dict[str, str] = {}
    logs = os.path.join(run_path, "logs")
    try:
        names = sorted(os.listdir(logs))
    except OSError:
        return out
    for n in names:
        if not (n.startswith("rank_") and n.endswith(".log")):
            continue
        try:
            with open(os.path.join(logs, n), "rb") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.seek(max(0, size - limit))
                out[n[5:-4]] = f.read().decode("utf-8", "replace")
        except OSError:
            continue
    return out


def _best(rows: list[dict[str, Any]], metric: str | None, mode: str) -> float | None:
    vals = [float(r[metric]) for r in rows if metric and metric in r]
    if not vals:
        return None
    return min(vals) if mode == "min" else max(vals)


class ResultsIndex:
    """Experiments and runs found under ``roots`` (folders), rescanned at most every 2 s.

    Thread-safe. ``extra_roots()`` (optional) returns more folders to look in each scan:
    the train server passes the parents of its jobs' run folders.
    """

    def __init__(self, roots: list[str], extra_roots: Any = None) -> None:
        self.roots = [os.path.abspath(os.path.expanduser(r)) for r in roots]
        self._extra = extra_roots
        self._lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self._scanned = -SCAN_TTL_S
        self._experiments: dict[str, str] = {}
        self._runs: dict[str, str] = {}

    def _scan(self) -> None:
        with self._scan_lock:  # a second caller waits for the scan under way, then uses it
            if time.monotonic() - self._scanned < SCAN_TTL_S:
                return
            self._rescan()
            self._scanned = time.monotonic()

    def _rescan(self) -> None:
        roots = list(self.roots)
        if self._extra is not None:
            try:
                roots.extend(os.path.abspath(r) for r in self._extra() if r)
            except Exception:  # noqa: BLE001, S110 - the store is down: scan the fixed roots
                pass
        exps: dict[str, str] = {}
        runs: dict[str, str] = {}
        for root in dict.fromkeys(roots):
            if os.path.isfile(os.path.join(root, STATE_FILE)):
                exps[path_id(root)] = root
                continue
            if os.path.isfile(os.path.join(root, RESULT_FILE)):
                runs[path_id(root)] = root
                continue
            try:
                entries = list(os.scandir(root))
            except OSError:
                continue
            for e in entries[:5000]:
                if not e.is_dir(follow_symlinks=False):
                    continue
                if os.path.isfile(os.path.join(e.path, STATE_FILE)):
                    exps[path_id(e.path)] = e.path
                elif os.path.isfile(os.path.join(e.path, RESULT_FILE)):
                    runs[path_id(e.path)] = e.path
        with self._lock:
            self._experiments, self._runs = exps, runs

    def experiment_path(self, exp_id: str) -> str | None:
        self._scan()
        with self._lock:
            return self._experiments.get(exp_id)

    def run_path(self, run_id: str) -> str | None:
        self._scan()
        with self._lock:
            path = self._runs.get(run_id)
            if path is not None:
                return path
            exps = list(self._experiments.values())
        for exp in exps:  # a trial's folder
            state = _read_json(os.path.join(exp, STATE_FILE)) or {}
            for t in state.get("trials") or []:
                p = t.get("path")
                if p and path_id(p) == run_id and os.path.realpath(p).startswith(
                        os.path.realpath(exp) + os.sep):
                    return p
        return None

    # ------------------------------------------------------------------ listings

    def list_experiments(self) -> list[dict[str, object]]:
        self._scan()
        with self._lock:
            items = list(self._experiments.items())
        out = []
        for eid, path in items:
            state = _read_json(os.path.join(path, STATE_FILE)) or {}
            trials = state.get("trials") or []
            counts: dict[str, int] = {}
            for t in trials:
                s = trial_state(t)
                counts[s] = counts.get(s, 0) + 1
            metric, mode = state.get("metric"), state.get("mode") or "max"
            best = None
            for t in trials:
                v = (t.get("last_result") or {}).get(metric) if metric else None
                if _is_num(v) and (best is None or (v < best if mode == "min" else v > best)):
                    best = v
            out.append({"id": eid, "name": os.path.basename(path), "path": path,
                        "num_trials": len(trials), "status": counts, "metric": metric,
                        "mode": mode, "best": best, "updated": state.get("timestamp")})
        out.sort(key=lambda e: float(e.get("updated") or 0), reverse=True)  # type: ignore[arg-type]
        return out

    def list_runs(self) -> list[dict[str, Any]]:
        self._scan()
        with self._lock:
            items = list(self._runs.items())
        out = []
        for rid, path in items:
            try:
                updated = os.path.getmtime(os.path.join(path, RESULT_FILE))
            except OSError:
                updated = None
            rows = read_rows(path, max_points=1) if updated else []
            out.append({"id": rid, "name": os.path.basename(path), "path": path,
                        "updated": updated, "metrics": rows[-1] if rows else {},
                        "failed": os.path.exists(os.path.join(path, ERROR_FILE))})
        out.sort(key=lambda r: float(r.get("updated") or 0), reverse=True)  # type: ignore[arg-type]
        return out

    # ------------------------------------------------------------------ details

    def experiment(self, exp_id: str, metric: str | None = None) -> dict[str, Any] | None:
        """Trials (config, state, last and best metric), curves and scheduler decisions."""
        path = self.experiment_path(exp_id)
        if path is None:
            return None
        state = _read_json(os.path.join(path, STATE_FILE)) or {}
        metric = metric or state.get("metric")
        mode = state.get("mode") or "max"
        trials = []
        keys: set[str] = set()
        config_keys: set[str] = set()
        for t in state.get("trials") or []:
            tpath = t.get("path") or ""
            inside = os.path.realpath(tpath).startswith(os.path.realpath(path) + os.sep)
            rows = read_rows(tpath) if inside else []
            for r in rows[-1:]:
                keys.update(r)
            if metric is None and rows:
                from tandem.server.dashboard.live import main_metric

                metric = main_metric(rows[-1])
            cfg = flatten(t.get("config") or {})
            config_keys.update(cfg)
            trials.append({
                "trial_id": t.get("trial_id"), "name": t.get("name"), "index": t.get("index"),
                "status": trial_state(t), "trial_status": t.get("status"),
                "config": cfg, "path": tpath,
                "run_id": path_id(tpath) if tpath else None,
                "last": {k: v for k, v in (t.get("last_result") or {}).items() if _is_num(v)},
                "error": t.get("error"), "decisions": t.get("decisions") or [],
                "rows": rows,
            })
        for t in trials:
            t["best"] = _best(t["rows"], metric, mode)
        # the curves of the best trials only: a 10,000-trial experiment stays one light page
        ranked = sorted((t for t in trials if t["best"] is not None),
                        key=lambda t: t["best"] if mode == "min" else -t["best"])
        keep = {id(t) for t in ranked[:CURVES_SENT]}
        for t in trials:
            if id(t) not in keep:
                t["rows"] = []
        return {"id": exp_id, "name": os.path.basename(path), "path": path, "metric": metric,
                "curves_shown": min(len(ranked), CURVES_SENT), "mode": mode, "metrics": sorted(keys), "config_keys": sorted(config_keys),
                "updated": state.get("timestamp"), "trials": trials}

    def run(self, run_id: str) -> dict[str, Any] | None:
        """One run folder: config, reports, checkpoints, each rank's log, error."""
        path = self.run_path(run_id)
        if path is None:
            return None
        rows = read_rows(path)
        error = None
        try:
            with open(os.path.join(path, ERROR_FILE), encoding="utf-8", errors="replace") as f:
                error = f.read()[-20000:]
        except OSError:
            pass
        return {"id": run_id, "name": os.path.basename(path), "path": path,
                "config": _read_json(os.path.join(path, PARAMS_FILE)), "rows": rows,
                "checkpoints": checkpoints(path, rows), "logs": read_logs(path), "error": error}
