"""Generate the Ray compatibility table in docs/migration.md from Ray itself.

The list of names comes from the installed Ray (the ``__all__`` of the modules users import,
or the public classes and functions a module defines where it has no ``__all__``), so a name
or parameter Ray has and tandem lacks shows up as "missing" instead of being forgotten. Each
Ray path ``ray.X`` is looked up as ``tandem.X``. Callables are compared by signature
(missing parameters, extra ones, defaults that differ). The hand-written "how it differs"
notes live in docs/compat_notes.yaml and are merged in.

    python -m tests.tools.compat_table            # exit 1 and print the diff if out of date
    python -m tests.tools.compat_table --write    # rewrite the table in docs/migration.md

tests/unit/test_ray_compat_table.py runs the check (``TANDEM_UPDATE_COMPAT=1`` makes it
rewrite the table instead).
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import os
import re
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MIGRATION_MD = os.path.join(ROOT, "docs", "migration.md")
NOTES_YAML = os.path.join(ROOT, "docs", "compat_notes.yaml")
BEGIN = "<!-- BEGIN GENERATED COMPAT TABLE: python -m tests.tools.compat_table --write -->"
END = "<!-- END GENERATED COMPAT TABLE -->"
REGENERATE = (
    "Regenerate it with `python -m tests.tools.compat_table --write` (or run the test with "
    "TANDEM_UPDATE_COMPAT=1), edit the notes in docs/compat_notes.yaml, and commit both."
)

# How each module's names are collected: "all" = its __all__; "defined" = the public classes
# and functions its source defines (modules without __all__); "constants" = its UPPER_CASE
# assignments (ray.tune.result); "source_all" = the ``__all__`` written in its source, for
# modules that import a heavy library (TensorFlow, Lightning, Transformers) when imported.
ALL, DEFINED, CONSTANTS, SOURCE_ALL = "all", "defined", "constants", "source_all"
SEARCH_LIBS = ("ax", "bayesopt", "bohb", "hebo", "hyperopt", "nevergrad", "optuna", "zoopt")
V2_API = ("config", "context", "data_parallel_trainer", "exceptions", "result", "callback",
          "report_config", "reported_checkpoint", "preemption", "validation_config",
          "train_fn_utils")
SCHEDULER_FILES = ("async_hyperband", "hb_bohb", "hyperband", "median_stopping_rule", "pb2",
                   "pbt", "resource_changing_scheduler", "trial_scheduler")
TUNE_INTEGRATIONS = ("keras", "lightgbm", "pytorch_lightning", "ray_train", "xgboost")
MODULES: list[tuple[str, str]] = [
    ("ray.train", ALL),
    ("ray.train.torch", ALL),
    *[(f"ray.train.v2.api.{m}", DEFINED) for m in V2_API],
    ("ray.tune", ALL),
    ("ray.tune.schedulers", ALL),
    ("ray.tune.search", ALL),
    ("ray.tune.search.basic_variant", DEFINED),
    ("ray.tune.search.concurrency_limiter", DEFINED),
    *[(f"ray.tune.search.{lib}", ALL) for lib in SEARCH_LIBS],
    ("ray.tune.search.sample", DEFINED),
    ("ray.tune.search.searcher", DEFINED),
    ("ray.tune.search.repeater", DEFINED),
    *[(f"ray.tune.schedulers.{m}", DEFINED) for m in SCHEDULER_FILES],
    ("ray.tune.stopper", ALL),
    ("ray.tune.logger", ALL),
    ("ray.tune.utils", ALL),
    ("ray.tune.result", CONSTANTS),
    ("ray.tune.experiment", ALL),
    ("ray.tune.trainable", ALL),
    ("ray.tune.result_grid", DEFINED),
    *[(f"ray.tune.integration.{m}", DEFINED) for m in TUNE_INTEGRATIONS],
    ("ray.train.backend", DEFINED),
    ("ray.train.context", DEFINED),
    ("ray.train.collective", ALL),
    ("ray.train.xgboost", ALL),
    ("ray.train.lightgbm", ALL),
    ("ray.train.tensorflow", SOURCE_ALL),
    ("ray.train.lightning", SOURCE_ALL),
    ("ray.train.huggingface.transformers", SOURCE_ALL),
    # every submodule of ray.air.integrations (checked against Ray's package below)
    ("ray.air.integrations.comet", DEFINED),
    ("ray.air.integrations.keras", DEFINED),
    ("ray.air.integrations.mlflow", DEFINED),
    ("ray.air.integrations.wandb", DEFINED),
]

# Config classes and entry points whose parameters get a table of their own.
SIGNATURES = [
    "ray.init",
    "ray.train.ScalingConfig",
    "ray.train.RunConfig",
    "ray.train.FailureConfig",
    "ray.train.CheckpointConfig",
    "ray.train.torch.TorchTrainer",
    "ray.train.v2.api.data_parallel_trainer.DataParallelTrainer",
    "ray.tune.Tuner",
    "ray.tune.TuneConfig",
    "ray.tune.RunConfig",
    "ray.tune.FailureConfig",
    "ray.tune.CheckpointConfig",
    "ray.tune.run",
]

SAME, DIFFERS, MISSING, EXTRA = "same", "differs", "missing", "tandem only"
_EMPTY = inspect.Parameter.empty


@dataclasses.dataclass
class ParamRow:
    name: str
    ray_default: str
    tandem_default: str
    status: str
    detail: str = ""
    note: str = ""


@dataclasses.dataclass
class NameRow:
    module: str
    name: str
    status: str
    detail: str = ""
    note: str = ""

    @property
    def ray_path(self) -> str:
        return f"{self.module}.{self.name}"

    @property
    def tandem_path(self) -> str:
        return tandem_path(self.ray_path)


@dataclasses.dataclass
class Table:
    ray_version: str
    names: list[NameRow]
    params: dict[str, list[ParamRow]]
    missing_notes: list[str]
    unused_notes: list[str]
    all_params: dict[str, list[ParamRow]] = dataclasses.field(default_factory=dict)
    """The parameters of every public class (its constructor) and function walked, by Ray
    path (those of ``params`` included)."""


def tandem_path(ray_path: str) -> str:
    return "tandem" + ray_path[len("ray"):]


# -- collecting Ray's names -------------------------------------------------------------------


def _source_tree(module: str) -> ast.Module:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise RuntimeError(f"{module} is not in the installed Ray")
    with open(spec.origin) as f:
        return ast.parse(f.read())


def ray_names(module: str, how: str) -> list[str]:
    """The public names of a Ray module, read without importing it where it has no
    __all__ (ray.air.integrations.keras needs TensorFlow to import)."""
    if how == ALL:
        return [n for n in importlib.import_module(module).__all__ if not n.startswith("_")]
    if how == SOURCE_ALL:
        for node in _source_tree(module).body:
            if isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                return [n for n in ast.literal_eval(node.value) if not n.startswith("_")]
        raise RuntimeError(f"{module} has no literal __all__")
    if how == CONSTANTS:  # what users can import from it, its own or re-exported
        return [n for n in dir(importlib.import_module(module))
                if re.fullmatch(r"[A-Z][A-Z0-9_]*", n)]
    names: list[str] = []
    for node in _source_tree(module).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and not node.name.startswith("_"):
            names.append(node.name)
    return list(dict.fromkeys(names))


def air_integration_modules() -> list[str]:
    import pkgutil

    from ray.air import integrations

    return sorted(f"ray.air.integrations.{m.name}" for m in pkgutil.iter_modules(
        integrations.__path__) if not m.name.startswith("_"))


# -- resolving objects ------------------------------------------------------------------------


def resolve(path: str) -> tuple[bool, Any]:
    """(found, object) for a dotted path: the longest importable module, then attributes.

    A module that exists but fails to import for another reason (a missing optional
    dependency) raises: that is not "missing in tandem"."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        try:
            obj: Any = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name is not None and (module == e.name or module.startswith(e.name + ".")):
                continue
            raise
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False, None
            obj = getattr(obj, attr)
        return True, obj
    return False, None


# Ray modules read from source instead of imported: they import their library (MLflow, W&B,
# TensorFlow) at import time, which costs seconds (or fails) and tells nothing more.
SOURCE_ONLY = ("ray.air.integrations.", "ray.train.tensorflow", "ray.train.lightning",
               "ray.train.huggingface", "ray.tune.integration.")


class _Source:
    """A default value as written in Ray's source (where it is not a literal)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _SourceCallable:
    """Stands for a Ray function or class read from source: only its signature is known."""

    def __init__(self, signature: inspect.Signature | None) -> None:
        if signature is not None:
            self.__signature__ = signature

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("read from Ray's source only")


def _default(node: ast.expr, names: dict[str, Any]) -> Any:
    """A default's value: a literal, or a name the module assigns or imports from a Ray
    module that is already loaded; else its source text."""
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.Name) and node.id in names:
            return names[node.id]
        return _Source(ast.unparse(node))


def _module_names(tree: ast.Module) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 \
                and isinstance(node.targets[0], ast.Name):
            try:
                names[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
        elif isinstance(node, ast.ImportFrom) and node.module in sys.modules:
            for alias in node.names:
                if hasattr(sys.modules[node.module], alias.name):
                    names[alias.asname or alias.name] = getattr(sys.modules[node.module],
                                                                alias.name)
    return names


def _source_signature(fn: ast.FunctionDef, drop_self: bool,
                      names: dict[str, Any]) -> inspect.Signature:
    a = fn.args
    P = inspect.Parameter
    positional = [(x, P.POSITIONAL_ONLY) for x in a.posonlyargs]
    positional += [(x, P.POSITIONAL_OR_KEYWORD) for x in a.args]
    if drop_self:
        positional = positional[1:]
    defaults = [_EMPTY] * (len(positional) - len(a.defaults)) + [_default(d, names)
                                                            for d in a.defaults]
    params = [P(x.arg, kind, default=d) for (x, kind), d in zip(positional, defaults)]
    if a.vararg:
        params.append(P(a.vararg.arg, P.VAR_POSITIONAL))
    params += [P(x.arg, P.KEYWORD_ONLY, default=_EMPTY if d is None else _default(d, names))
               for x, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        params.append(P(a.kwarg.arg, P.VAR_KEYWORD))
    return inspect.Signature(params)


def _from_source(path: str, depth: int = 0) -> tuple[bool, Any]:
    module, name = path.rsplit(".", 1)
    tree = _source_tree(module)
    names = _module_names(tree)
    for node in tree.body:  # a re-export: follow it to the module that defines the name
        if isinstance(node, ast.ImportFrom) and depth < 4 and any(
                (a.asname or a.name) == name for a in node.names):
            alias = next(a for a in node.names if (a.asname or a.name) == name)
            source = node.module or ""
            if node.level:
                spec = importlib.util.find_spec(module)
                is_pkg = spec is not None and spec.submodule_search_locations is not None
                base = module.split(".")
                base = base if is_pkg else base[:-1]
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([source] if source else []))
            try:
                return _from_source(f"{source}.{alias.name}", depth + 1)
            except (RuntimeError, SyntaxError, ModuleNotFoundError, ValueError):
                return True, None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return True, _SourceCallable(_source_signature(node, False, names))
        if isinstance(node, ast.ClassDef) and node.name == name:
            init = [n for n in node.body
                    if isinstance(n, ast.FunctionDef) and n.name == "__init__"]
            sig = _source_signature(init[0], True, names) if init else None
            return True, _SourceCallable(sig)
    return False, None


def ray_object(path: str) -> tuple[bool, Any]:
    module = path.rsplit(".", 1)[0]
    if path.startswith(SOURCE_ONLY) and module not in sys.modules:
        try:
            return _from_source(path)
        except (RuntimeError, SyntaxError, ModuleNotFoundError, ValueError):
            return False, None
    try:
        return resolve(path)
    except ImportError:
        return False, None


# -- comparing signatures ---------------------------------------------------------------------


def _fmt(value: Any) -> str:
    if value is _EMPTY:
        return "required"
    text = repr(value)
    if " at 0x" in text or text.startswith("<"):
        text = "<factory>" if "factory" in text.lower() else f"<{type(value).__name__}>"
    if "DEPRECATED" in text.upper():
        text = "deprecated"
    return text


def _same_default(a: Any, b: Any) -> bool:
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) \
            and not isinstance(b, bool):
        return a == b
    return _fmt(a) == _fmt(b)


def _signature(obj: Any) -> inspect.Signature | None:
    """The call signature; for a class whose ``__init__`` passes ``**kwargs`` on to its base
    (tandem's ``TorchTrainer``), the base's parameters are added."""
    if not callable(obj):
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    if not inspect.isclass(obj):
        return sig
    params = list(sig.parameters.values())
    for base in obj.__mro__[1:]:
        var_kw = [p for p in params if p.kind == p.VAR_KEYWORD]
        if not var_kw or "__init__" not in vars(base) or base is object:
            continue
        try:
            more = list(inspect.signature(base.__init__).parameters.values())[1:]
        except (TypeError, ValueError):
            break
        names = {p.name for p in params}
        params.remove(var_kw[0])
        extra = [p.replace(kind=p.KEYWORD_ONLY) for p in more if p.name not in names
                 and p.kind not in (p.VAR_POSITIONAL,)]
        params += sorted(extra, key=lambda p: p.kind)
    params.sort(key=lambda p: p.kind)
    return sig.replace(parameters=params)


def _assigned_attributes(cls: type) -> set[str]:
    """``self.x = ...`` targets in the methods of ``cls`` and its bases (not ``object``)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name) and node.value.id == "self"):
                names.add(node.attr)
    return names


def members(cls: type, assigned: bool) -> set[str]:
    """Public attributes and methods of a class (dataclass fields included; with
    ``assigned``, also what its methods assign to ``self``)."""
    names = {n for n in dir(cls) if not n.startswith("_")}
    if dataclasses.is_dataclass(cls):
        names |= {f.name for f in dataclasses.fields(cls)}
    if assigned:
        names |= _assigned_attributes(cls)
    return {n for n in names if not n.startswith("_")}


def compare_params(ray_obj: Any, tandem_obj: Any) -> list[ParamRow] | None:
    """One row per parameter of Ray's signature (private ``_x`` ones left out), then the
    ones only tandem has. None when either side has no inspectable signature."""
    ray_sig, tandem_sig = _signature(ray_obj), _signature(tandem_obj)
    if ray_sig is None or tandem_sig is None:
        return None
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    ours = {n: p for n, p in tandem_sig.parameters.items() if p.kind not in variadic}
    tandem_kwargs = any(p.kind == inspect.Parameter.VAR_KEYWORD
                        for p in tandem_sig.parameters.values())
    positional = [n for n, p in tandem_sig.parameters.items()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rows: list[ParamRow] = []
    required_positional = True
    for index, (name, p) in enumerate(ray_sig.parameters.items()):
        if p.kind in variadic or name.startswith("_"):
            continue
        if p.default is not _EMPTY:
            required_positional = False
        mine = ours.get(name)
        if mine is None:
            detail = "accepted only through **kwargs" if tandem_kwargs else ""
            rows.append(ParamRow(name, _fmt(p.default), "—", MISSING, detail))
            continue
        details = []
        if _fmt(p.default) == "deprecated":
            details.append("deprecated in Ray: setting it raises there")
        elif not _same_default(p.default, mine.default):
            details.append("default differs")
        if (required_positional and p.kind == p.POSITIONAL_OR_KEYWORD
                and (name not in positional or positional.index(name) != index)):
            details.append("not positional at the same place")
        rows.append(ParamRow(name, _fmt(p.default), _fmt(mine.default),
                             DIFFERS if details else SAME, "; ".join(details)))
    ray_names_ = set(ray_sig.parameters)
    for name, p in ours.items():
        if name not in ray_names_ and not name.startswith("_"):
            rows.append(ParamRow(name, "—", _fmt(p.default), EXTRA))
    return rows


def summarize(rows: list[ParamRow], lacking_members: list[str]) -> tuple[str, str]:
    """(status, detail) of a callable from its parameter rows and the class members Ray
    has that tandem lacks (what tandem adds is shown in the parameter tables only)."""
    missing = [r.name for r in rows if r.status == MISSING]
    differ = [r.name for r in rows if r.status == DIFFERS]
    parts = []
    if missing:
        parts.append("lacks parameters " + ", ".join(f"`{n}`" for n in missing))
    if differ:
        parts.append("parameters differ: " + ", ".join(f"`{n}`" for n in differ))
    if lacking_members:
        parts.append("lacks attributes/methods " + ", ".join(f"`{n}`" for n in lacking_members))
    return (DIFFERS if missing or differ or lacking_members else SAME), "; ".join(parts)


# -- notes ------------------------------------------------------------------------------------


def load_notes(path: str = NOTES_YAML) -> dict[str, Any]:
    import yaml

    with open(path) as f:
        data = yaml.safe_load(f) or {}
    for key in ("modules", "names", "params"):
        data.setdefault(key, {})
        data[key] = data[key] or {}
    return data


def _note_for(entry: Any, found: bool) -> tuple[str, str | None]:
    """(note text, forced status or None) from a notes entry: a string, or a mapping with
    ``note``, ``missing`` (used while tandem lacks the name) and ``status``."""
    if entry is None:
        return "", None
    if isinstance(entry, str):
        return entry.strip(), None
    if not found and entry.get("missing"):
        return str(entry["missing"]).strip(), None
    return str(entry.get("note", "")).strip(), entry.get("status")


# -- building the table -----------------------------------------------------------------------


def build(notes: dict[str, Any] | None = None,
          modules: Iterable[tuple[str, str]] | None = None,
          signatures: Iterable[str] | None = None,
          lookup: Callable[[str], tuple[bool, Any]] = resolve) -> Table:
    """Compare Ray with tandem. ``lookup`` resolves a tandem path (tests pass a fake one)."""
    import ray

    notes = load_notes() if notes is None else notes
    modules = list(MODULES if modules is None else modules)
    signatures = list(SIGNATURES if signatures is None else signatures)
    used: set[tuple[str, str]] = set()
    rows: list[NameRow] = []
    all_params: dict[str, list[ParamRow]] = {}
    # a Ray object reachable under several paths shares the note of the path that has one
    by_object: dict[int, str] = {}
    imported = {m for m, how in modules if how == ALL}  # no extra imports (mlflow, wandb)
    for key in notes["names"]:
        if key.rsplit(".", 1)[0] not in imported:
            continue
        ok, obj = ray_object(key)
        if ok and (inspect.isclass(obj) or inspect.isfunction(obj)):
            by_object.setdefault(id(obj), key)
    for module, how in modules:
        for name in ray_names(module, how):
            ray_path = f"{module}.{name}"
            found, ours = lookup(tandem_path(ray_path))
            status, detail = (SAME, "") if found else (MISSING, "")
            if found:
                ok, theirs = ray_object(ray_path)
                param_rows = compare_params(theirs, ours) if ok else None
                if param_rows is not None and how != CONSTANTS:
                    all_params[ray_path] = param_rows
                if param_rows is not None:
                    lacking = (sorted(members(theirs, False) - members(ours, True))
                               if inspect.isclass(theirs) and inspect.isclass(ours) else [])
                    status, detail = summarize(param_rows, lacking)
                    if ray_path in signatures:
                        detail = "see its parameters below" if status == DIFFERS else detail
                elif ok and how == CONSTANTS and theirs != ours:
                    status, detail = DIFFERS, f"Ray `{theirs!r}`, tandem `{ours!r}`"
            entry = notes["names"].get(ray_path)
            if entry is None and how != CONSTANTS:
                ok, theirs = ray_object(ray_path)
                alias = by_object.get(id(theirs)) if ok else None
                entry = notes["names"].get(alias) if alias else None
            if entry is not None:
                used.add(("names", ray_path))
            elif module in notes["modules"]:
                entry = notes["modules"][module]
                used.add(("modules", module))
            note, forced = _note_for(entry, found)
            if forced and found:
                status = forced
            rows.append(NameRow(module, name, status, detail, note))
    params: dict[str, list[ParamRow]] = {}
    for ray_path in signatures:
        ok, theirs = ray_object(ray_path)
        if not ok:
            raise RuntimeError(f"{ray_path} is not in the installed Ray")
        found, ours = lookup(tandem_path(ray_path))
        if not found:
            params[ray_path] = []
            continue
        param_rows = compare_params(theirs, ours) or []
        entries = notes["params"].get(ray_path) or {}
        if entries:
            used.add(("params", ray_path))
        for row in param_rows:
            note, forced = _note_for(entries.get(row.name), row.status != MISSING)
            row.note = note
            if forced and row.status != MISSING:
                row.status = forced
        params[ray_path] = param_rows
        all_params[ray_path] = param_rows
    for path, prs in all_params.items():  # the notes of the other callables' parameters
        if path in params:
            continue
        entries = notes["params"].get(path) or {}
        if entries:
            used.add(("params", path))
        for row in prs:
            if row.status == MISSING or row.name in entries:
                row.note, _forced = _note_for(entries.get(row.name), row.status != MISSING)
    missing_notes = [r.ray_path for r in rows if not r.note]
    missing_notes += [f"{path}({row.name})" for path, prs in params.items() for row in prs
                      if row.status != SAME and not row.note]
    unused = [f"{kind}: {key}" for kind in ("modules", "names")
              for key in notes[kind] if (kind, key) not in used]
    missing_notes += [f"{path}({row.name})" for path, prs in all_params.items()
                      if path not in params for row in prs
                      if row.status == MISSING and not row.note]
    for path, entries in notes["params"].items():
        known = {r.name for r in all_params.get(path, [])}
        unused += [f"params: {path}({n})" for n in (entries or {}) if n not in known]
    return Table(ray.__version__, rows, params, missing_notes, unused, all_params)


# -- rendering --------------------------------------------------------------------------------


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def _counts(statuses: list[str], keys: tuple[str, ...]) -> str:
    return ", ".join(f"{statuses.count(k)} {k}" for k in keys)


def render(table: Table) -> str:
    out = [BEGIN, "",
           (f"_Generated from Ray {table.ray_version} (installed by the `all` extra) by "
            "`python -m tests.tools.compat_table --write`; the notes come from "
            "`docs/compat_notes.yaml`. Do not edit between the markers._"), ""]
    statuses = [r.status for r in table.names]
    param_statuses = [r.status for prs in table.params.values() for r in prs]
    out += [
        (f"**Names:** {len(statuses)} public names in Ray's modules: "
         f"{_counts(statuses, (SAME, DIFFERS, MISSING))}."),
        (f"**Parameters** of the {len(table.params)} config classes and entry points below: "
         f"{len([s for s in param_statuses if s != EXTRA])} in Ray: "
         f"{_counts(param_statuses, (SAME, DIFFERS, MISSING))}; "
         f"{param_statuses.count(EXTRA)} more that only tandem has."),
        (f"**Parameters of every public class and function** above (constructors of classes): "
         f"{len([r for prs in table.all_params.values() for r in prs if r.status != EXTRA])} "
         f"in Ray: {_counts([r.status for prs in table.all_params.values() for r in prs], (SAME, DIFFERS, MISSING))}."),
        "",
        ("\"same\" means the name exists under the mirrored path (`ray.X` → `tandem.X`) with "
         "Ray's parameters and defaults, and its note found no difference in behaviour; "
         "\"differs\" says how in the note; \"missing\" means `import tandem.X` fails."), ""]
    by_module: dict[str, list[NameRow]] = {}
    for row in table.names:
        by_module.setdefault(row.module, []).append(row)
    for module, rows in by_module.items():
        counts = _counts([r.status for r in rows], (SAME, DIFFERS, MISSING))
        out += [f"#### `{module}` → `{tandem_path(module)}` ({counts})", "",
                "| Ray name | status | how it differs |", "|---|---|---|"]
        for row in rows:
            text = " — ".join(t for t in (row.detail, row.note) if t)
            out.append(f"| `{row.name}` | {row.status} | {_cell(text)} |")
        out.append("")
    lacking = [(path, r) for path, prs in table.all_params.items()
               if path not in table.params for r in prs if r.status == MISSING]
    out += ["### Parameters Ray has that tandem lacks (other classes and functions)", ""]
    if lacking:
        out += ["| Ray callable | parameter | Ray default | note |", "|---|---|---|---|"]
        out += [f"| `{path}` | `{r.name}` | `{_cell(r.ray_default)}` | {_cell(r.note)} |"
                for path, r in lacking]
    else:
        out.append("None: every parameter of Ray's public classes and functions above exists "
                   "in tandem (see each name's row for the ones whose default differs).")
    out.append("")
    out += ["### Parameters of the config classes and entry points", ""]
    for path, prs in table.params.items():
        if not prs:
            out += [f"#### `{path}` → `{tandem_path(path)}`: missing", ""]
            continue
        counts = _counts([r.status for r in prs], (SAME, DIFFERS, MISSING, EXTRA))
        out += [f"#### `{path}` → `{tandem_path(path)}` ({counts})", "",
                "| parameter | Ray default | tandem default | status | how it differs |",
                "|---|---|---|---|---|"]
        for r in prs:
            text = " — ".join(t for t in (r.detail, r.note) if t)
            out.append(f"| `{r.name}` | `{_cell(r.ray_default)}` | `{_cell(r.tandem_default)}` "
                       f"| {r.status} | {_cell(text)} |")
        out.append("")
    out.append(END)
    return "\n".join(out) + "\n"


def splice(document: str, table_text: str) -> str:
    """``document`` with the text between the markers replaced (appended if absent)."""
    start, end = document.find(BEGIN), document.find(END)
    if start == -1 or end == -1:
        return document.rstrip("\n") + "\n\n" + table_text
    return document[:start] + table_text + document[end + len(END) + 1:]


def check(write: bool = False) -> tuple[bool, str]:
    """(up to date, message). With ``write`` the table is rewritten first."""
    table = build()
    problems = []
    if table.unused_notes:
        problems.append("docs/compat_notes.yaml has notes for names Ray does not have "
                        "(renamed or removed?):\n  " + "\n  ".join(table.unused_notes))
    if table.missing_notes:
        problems.append("rows without a note (add one to docs/compat_notes.yaml):\n  "
                        + "\n  ".join(table.missing_notes))
    with open(MIGRATION_MD) as f:
        current = f.read()
    wanted = splice(current, render(table))
    if write and wanted != current:
        with open(MIGRATION_MD, "w") as f:
            f.write(wanted)
        current = wanted
    if wanted != current:
        diff = "".join(difflib.unified_diff(
            current.splitlines(True), wanted.splitlines(True),
            "docs/migration.md (committed)", "docs/migration.md (generated)"))
        problems.append("docs/migration.md's compatibility table is out of date.\n"
                        + REGENERATE + "\n" + diff)
    return not problems, "\n\n".join(problems)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--write", action="store_true", help="rewrite docs/migration.md")
    args = parser.parse_args(argv)
    ok, message = check(write=args.write)
    if message:
        print(message)
    if args.write:
        print(f"wrote {os.path.relpath(MIGRATION_MD, ROOT)}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
