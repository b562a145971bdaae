"""Finds public parameters that are accepted and then ignored (issue 17, item 9).

The audit walks the public signatures of the modules users import, and for each parameter
checks, by reading the package's source (AST), that the value goes somewhere:

- a function's (or method's) parameter must be read in its body; a parameter the body never
  loads is ignored;
- a constructor's parameter must be read in ``__init__`` (used to build something), passed
  to the parent's ``__init__`` (then the parent's parameter is audited), or stored as
  ``self.<attr>``. A stored attribute needs a *reader*: a function, named in the audit's
  table, that loads ``.<attr>``, and that is none of the class's own bookkeeping methods
  (``__init__``, ``__post_init__``, ``__repr__``, ``__eq__``...). A dataclass field is a
  stored attribute of the same name.

A parameter may instead be *refused*: the table gives a non-default value, and the audit
calls the entry point with it and expects an error that names the parameter. Nothing is
assumed read because a similar name appears somewhere: each reader is named and checked.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pathlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

SRC = pathlib.Path(__file__).resolve().parents[2] / "src" / "tandem"

#: Methods of a class that do not count as reading its own fields: building, validating,
#: printing, comparing and pickling it are not *using* a setting.
#: A hand-written ``__init__`` may be named as the reader when it *uses* the stored value
#: (``self.setup(self.config)``); only a loaded ``self.<attr>`` counts there, not the store.
BOOKKEEPING = frozenset({
    "__init__", "__post_init__", "__repr__", "__str__", "__eq__", "__hash__",
    "__getstate__", "__setstate__", "__reduce__", "__reduce_ex__", "__copy__", "__deepcopy__",
})


@dataclass(frozen=True)
class Reader:
    """The parameter is stored as ``self.<attr>`` (``attr`` defaults to the parameter's
    name) and read by ``where`` (``"module:Qual.name"``; several separated by ``|``)."""

    where: str
    attr: str | None = None


@dataclass(frozen=True)
class Refused:
    """Passing ``value`` raises an error naming the parameter, before any work starts.
    ``call(**{param: value})`` runs the entry point (default: with no other argument)."""

    value: Any
    call: Callable[..., Any] | None = None


@dataclass(frozen=True)
class Same:
    """Accepted with Ray's semantics although no code acts on it (``reason`` says why Ray's
    behaviour needs no action here). Kept to a handful; each one is listed in the report."""

    reason: str


Disposition = Reader | Refused | Same


# -- the package's source, indexed ------------------------------------------------------------
@dataclass
class FunctionInfo:
    module: str
    qualname: str
    node: ast.FunctionDef | ast.AsyncFunctionDef
    attr_loads: set[str] = field(default_factory=set)
    name_loads: set[str] = field(default_factory=set)


def _module_name(path: pathlib.Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


class SourceIndex:
    """Every function in the package (methods and nested functions included), by
    ``module:qualname``, with the attribute names and variable names it loads."""

    def __init__(self, root: pathlib.Path = SRC, extra: dict[str, str] | None = None) -> None:
        self.functions: dict[str, FunctionInfo] = {}
        for path in sorted(root.rglob("*.py")):
            self.add_source(_module_name(path), path.read_text())
        for module, text in (extra or {}).items():
            self.add_source(module, text)

    def add_source(self, module: str, text: str) -> None:
        tree = ast.parse(text)
        self._walk(module, tree, prefix="")

    def _walk(self, module: str, node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                qual = f"{prefix}{child.name}"
                info = FunctionInfo(module, qual, child)
                for sub in ast.walk(child):
                    if isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Load):
                        info.attr_loads.add(sub.attr)
                    elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
                        info.name_loads.add(sub.id)
                    elif (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name)
                          and sub.func.id in ("getattr", "hasattr") and len(sub.args) >= 2
                          and isinstance(sub.args[1], ast.Constant)
                          and isinstance(sub.args[1].value, str)):
                        info.attr_loads.add(sub.args[1].value)
                self.functions[f"{module}:{qual}"] = info
                self._walk(module, child, prefix=f"{qual}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                self._walk(module, child, prefix=f"{prefix}{child.name}.")
            else:
                self._walk(module, child, prefix)

    def get(self, obj: Any) -> FunctionInfo | None:
        fn = inspect.unwrap(obj)
        module = getattr(fn, "__module__", None)
        qual = getattr(fn, "__qualname__", None)
        return self.functions.get(f"{module}:{qual}")

    def readers_of(self, attr: str, exclude_class: str | None = None) -> list[str]:
        out = []
        for key, info in self.functions.items():
            if attr not in info.attr_loads:
                continue
            if exclude_class is not None and _is_bookkeeping(key, exclude_class):
                continue
            out.append(key)
        return out


def _is_bookkeeping(key: str, class_key: str) -> bool:
    """``key`` is one of the class ``class_key``'s own bookkeeping methods."""
    owner, _, method = key.rpartition(".")
    return owner == class_key and method in BOOKKEEPING


# -- where a constructor parameter goes --------------------------------------------------------
@dataclass(frozen=True)
class Flow:
    kind: str  # "consumed" | "stored" | "parent" | "unread"
    attrs: tuple[str, ...] = ()


def _is_self_attr(node: ast.AST, self_name: str) -> str | None:
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == self_name):
        return node.attr
    return None


def _names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _is_super_init(call: ast.Call) -> bool:
    f = call.func
    return (isinstance(f, ast.Attribute) and f.attr == "__init__" and isinstance(f.value, ast.Call)
            and isinstance(f.value.func, ast.Name) and f.value.func.id == "super")


def _is_validation(stmt: ast.stmt) -> bool:
    """``if <test>: raise ...`` (with nothing else in it): checking a value is not using it."""
    return (isinstance(stmt, ast.If) and not stmt.orelse
            and all(isinstance(s, ast.Raise) for s in stmt.body))


def init_flow(node: ast.FunctionDef | ast.AsyncFunctionDef, param: str) -> Flow:
    """How ``__init__`` uses ``param``: read to build something ("consumed"), passed to
    ``super().__init__`` ("parent"), only stored in ``self.<attr>`` ("stored"), or never
    read at all ("unread"). Validation (``if ...: raise``) and error messages do not count."""
    self_name = node.args.args[0].arg if node.args.args else "self"
    stored: list[str] = []
    consumed = parent = False

    def visit(stmts: list[ast.stmt]) -> None:
        nonlocal consumed, parent
        for stmt in stmts:
            if _is_validation(stmt) or isinstance(stmt, ast.Raise):
                continue
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                attrs = [_is_self_attr(t, self_name) for t in targets]
                if all(a is not None for a in attrs) and param in _names_in(stmt.value):
                    # stored, even if computed from it (``self._mode = check_mode(mode)``):
                    # the stored value still needs a reader
                    stored.extend(a for a in attrs if a is not None)
                    continue
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) \
                    and _is_super_init(stmt.value):
                if param in _names_in(stmt.value):
                    parent = True
                continue
            if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):
                heads: list[ast.AST] = []
                if isinstance(stmt, (ast.If, ast.While)):
                    heads.append(stmt.test)
                elif isinstance(stmt, ast.For):
                    heads.append(stmt.iter)
                elif isinstance(stmt, ast.With):
                    heads.extend(i.context_expr for i in stmt.items)
                if any(param in _names_in(h) for h in heads):
                    consumed = True
                visit(stmt.body)
                visit(getattr(stmt, "orelse", []) or [])
                visit(getattr(stmt, "finalbody", []) or [])
                for h in getattr(stmt, "handlers", []) or []:
                    visit(h.body)
                continue
            if param in _names_in(stmt):
                consumed = True

    visit(node.body)
    if consumed:
        return Flow("consumed", tuple(stored))
    if parent:
        return Flow("parent", tuple(stored))
    if stored:
        return Flow("stored", tuple(stored))
    return Flow("unread")


# -- public entry points -----------------------------------------------------------------------
def _is_interface_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A hook or abstract method the user overrides: its body is a docstring, ``pass``,
    ``...``, ``return`` of a constant / ``None``, or ``raise NotImplementedError``."""
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    for stmt in body:
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        if isinstance(stmt, ast.Return) and (stmt.value is None or isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None and "NotImplementedError" in \
                ast.unparse(stmt.exc):
            continue
        return False
    return True


def _own_params(fn: Any) -> list[inspect.Parameter]:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [p for p in sig.parameters.values()
            if p.name not in ("self", "cls") and not p.name.startswith("_")]


@dataclass(frozen=True)
class Param:
    entry: str  # e.g. "tandem.train.RunConfig" or "tandem.tune.Tuner.restore"
    name: str  # the parameter (``**kw`` for a catch-all)
    owner: Any  # the class (for a constructor) or function
    is_constructor: bool


def public_callables(modules: list[str], skip: set[str]) -> Iterator[tuple[str, Any]]:
    seen: set[int] = set()
    for mod_name in modules:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError:
            continue  # an optional path not present in this tree
        for name in getattr(mod, "__all__", []):
            obj = getattr(mod, name)
            if id(obj) in seen or not getattr(obj, "__module__", "").startswith("tandem"):
                continue
            seen.add(id(obj))
            key = f"{mod_name}.{name}"
            if key in skip:
                continue
            if inspect.isclass(obj) or inspect.isfunction(obj):
                yield key, obj


def walk_params(modules: list[str], skip: set[str], index: SourceIndex) -> Iterator[Param]:
    import enum

    for key, obj in public_callables(modules, skip):
        if inspect.isfunction(obj):
            for p in _own_params(obj):
                yield Param(key, _pname(p), obj, False)
            continue
        if issubclass(obj, (BaseException, enum.Enum)):
            continue
        init = obj.__init__
        if dataclasses.is_dataclass(obj) or (index.get(init) is not None
                                             and not _is_interface_stub(index.get(init).node)):
            for p in _own_params(obj):
                yield Param(key, _pname(p), obj, True)
        for mname, member in vars(obj).items():
            if mname.startswith("_"):
                continue
            fn = member.__func__ if isinstance(member, (classmethod, staticmethod)) else member
            if not inspect.isfunction(fn):
                continue
            info = index.get(fn)
            if info is None or _is_interface_stub(info.node):
                continue
            for p in _own_params(fn):
                yield Param(f"{key}.{mname}", _pname(p), fn, False)


def _pname(p: inspect.Parameter) -> str:
    if p.kind is inspect.Parameter.VAR_KEYWORD:
        return f"**{p.name}"
    if p.kind is inspect.Parameter.VAR_POSITIONAL:
        return f"*{p.name}"
    return p.name


def _init_of(cls: type) -> Any:
    for klass in cls.__mro__:
        if "__init__" in vars(klass):
            return vars(klass)["__init__"], klass
    return None, None


# -- the audit ---------------------------------------------------------------------------------
def audit(params: list[Param], table: dict[str, dict[str, Disposition]],
          index: SourceIndex) -> list[str]:
    """Problems found, one line each (empty: every parameter is read or refused)."""
    problems: list[str] = []
    for p in params:
        disp = table.get(p.entry, {}).get(p.name)
        if isinstance(disp, Refused):
            problems.extend(_check_refused(p, disp))
            continue
        if isinstance(disp, Same):
            if not disp.reason.strip():
                problems.append(f"{p.entry}({p.name}): Same() needs its reason")
            continue
        if p.is_constructor:
            problems.extend(_check_constructor_param(p, disp, index))
        else:
            problems.extend(_check_function_param(p, disp, index))
    return problems


def _check_function_param(p: Param, disp: Disposition | None, index: SourceIndex) -> list[str]:
    info = index.get(p.owner)
    if info is None:
        return [f"{p.entry}: source not found"]
    name = p.name.lstrip("*")
    if name not in _body_loads(info.node):
        return [(f"{p.entry}({p.name}): accepted but never read in its body; use it, or refuse "
                f"a non-default value with an error naming it (table entry Refused(...))")]
    if isinstance(disp, Reader):
        return _check_reader(p, disp, index, attr=disp.attr or name, class_key=None)
    return []


def _body_loads(node: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    out: set[str] = set()
    for stmt in node.body:
        if isinstance(stmt, ast.Delete):
            continue
        out |= _names_in(stmt)
    return out


def _check_constructor_param(p: Param, disp: Disposition | None, index: SourceIndex) -> list[str]:
    cls = p.owner
    class_key = f"{cls.__module__}:{cls.__qualname__}"
    if dataclasses.is_dataclass(cls):
        flow = Flow("stored", (p.name,))
    else:
        init, owner = _init_of(cls)
        info = index.get(init)
        if info is None:
            return [f"{p.entry}: __init__ source not found"]
        class_key = f"{owner.__module__}:{owner.__qualname__}"
        flow = init_flow(info.node, _received_as(info.node, p.name.lstrip("*")))
        if flow.kind == "parent":
            parent = _parent_with_param(owner, p.name)
            if parent is None:
                return [(f"{p.entry}({p.name}): passed to super().__init__, whose class has no "
                        f"such parameter")]
            parent_param = Param(p.entry, p.name, parent, True)
            return _check_constructor_param(parent_param, disp, index)
    if flow.kind == "unread":
        return [(f"{p.entry}({p.name}): accepted but never read by __init__; use it, or refuse "
                f"a non-default value with an error naming it (table entry Refused(...))")]
    if flow.kind == "consumed" and not isinstance(disp, Reader):
        return []
    if not isinstance(disp, Reader):
        attrs = ", ".join(flow.attrs)
        suggest = sorted({r for a in flow.attrs for r in index.readers_of(a, class_key)})[:6]
        return [(f"{p.entry}({p.name}): stored as self.{attrs}; name the function that acts on "
                f"it in the table (Reader('module:Qual.name')), or refuse a non-default value. "
                f"Functions loading .{flow.attrs[0] if flow.attrs else '?'}: {suggest or 'none'}")]
    attr = disp.attr or (flow.attrs[0] if flow.attrs else p.name)
    return _check_reader(p, disp, index, attr=attr, class_key=class_key)


def _received_as(node: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> str:
    """The name ``__init__`` receives a public parameter under: its own, or its ``**kwargs``
    when the class shows a signature the function does not spell out (the boosted-tree
    trainers' ``xgboost_config`` arrives in ``**library_config``)."""
    args = node.args
    named = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    if name not in named and args.kwarg is not None:
        return args.kwarg.arg
    return name


def _parent_with_param(cls: type, name: str) -> type | None:
    for klass in cls.__mro__[1:]:
        init = vars(klass).get("__init__")
        if init is not None and name in inspect.signature(init).parameters:
            return klass
    return None


def _check_reader(p: Param, disp: Reader, index: SourceIndex, *, attr: str,
                  class_key: str | None) -> list[str]:
    problems = []
    for where in disp.where.split("|"):
        where = where.strip()
        info = index.functions.get(where)
        if info is None:
            problems.append(f"{p.entry}({p.name}): reader {where!r} does not exist")
            continue
        if class_key is not None and _is_bookkeeping(where, class_key) and not (
                where.endswith(".__init__") and not dataclasses.is_dataclass(p.owner)):
            problems.append(f"{p.entry}({p.name}): reader {where!r} is the class's own "
                            f"bookkeeping (building/validating/printing is not using it)")
            continue
        if attr not in info.attr_loads and attr not in info.name_loads:
            problems.append(f"{p.entry}({p.name}): reader {where!r} never loads .{attr}")
    return problems


def _check_refused(p: Param, disp: Refused) -> list[str]:
    call = disp.call or p.owner
    kwargs = dict(disp.value) if p.name.startswith("**") else {p.name: disp.value}
    named = ", ".join(kwargs)
    try:
        call(**kwargs)
    except Exception as e:  # noqa: BLE001 — any error that names the parameter will do
        if any(k not in str(e) for k in kwargs):
            return [(f"{p.entry}({p.name}={disp.value!r}) raised {type(e).__name__}, but its "
                    f"message does not name {named}: {e}")]
        return []
    return [f"{p.entry}({p.name}={disp.value!r}) is listed as refused but was accepted"]
