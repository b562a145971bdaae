"""Counts loose types in tandem's function signatures (issue 26: typed messages).

Two counts, over every ``def`` under ``src/tandem`` (parameters and return annotations):

- ``any``: annotations that mention ``Any`` (``Any``, ``dict[str, Any]``, ``Callable[..., Any]``
  each count once per parameter or return);
- ``bare``: bare ``dict`` / ``list`` (no type arguments) in *public* signatures: a public
  function or method (no leading ``_`` on it, its class or its module path).

``tests/unit/test_signature_types.py`` fails when either count rises above its ceiling.

Run it: ``python -m tests.tools.signature_types [--list any|bare]``.
"""

from __future__ import annotations

import argparse
import ast
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "src", "tandem")


@dataclass(frozen=True)
class Hit:
    path: str
    line: int
    function: str
    where: str  # the parameter's name, or "return"
    annotation: str


def _mentions_any(node: ast.expr) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id == "Any":
            return True
        if isinstance(sub, ast.Attribute) and sub.attr == "Any":
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            # a string annotation (or part of one): parse it
            try:
                inner = ast.parse(sub.value, mode="eval").body
            except SyntaxError:
                continue
            if _mentions_any(inner):
                return True
    return False


def _bare_containers(node: ast.expr) -> bool:
    """``dict`` or ``list`` used without type arguments anywhere in the annotation."""
    subscripted = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Subscript)}
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and sub.id in ("dict", "list") and id(sub) not in subscripted:
            return True
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            try:
                inner = ast.parse(sub.value, mode="eval").body
            except SyntaxError:
                continue
            if _bare_containers(inner):
                return True
    return False


def _annotations(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[tuple[str, ast.expr]]:
    a = fn.args
    for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs]:
        if arg.annotation is not None:
            yield arg.arg, arg.annotation
    for arg in (a.vararg, a.kwarg):
        if arg is not None and arg.annotation is not None:
            yield arg.arg, arg.annotation
    if fn.returns is not None:
        yield "return", fn.returns


def _functions(tree: ast.Module) -> Iterator[tuple[str, bool, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """``(qualified name, private, node)`` for every def, nested ones included."""

    def walk(node: ast.AST, prefix: str, private: bool) -> Iterator[
            tuple[str, bool, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = prefix + child.name
                priv = private or (child.name.startswith("_") and not child.name.startswith("__"))
                yield name, priv, child
                yield from walk(child, name + ".", True)  # a nested def is never public
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".",
                                private or child.name.startswith("_"))
            else:
                yield from walk(child, prefix, private)

    yield from walk(tree, "", False)


def scan(root: str = SRC) -> tuple[list[Hit], list[Hit]]:
    """``(any_hits, bare_public_hits)`` over every module under ``root``."""
    any_hits: list[Hit] = []
    bare_hits: list[Hit] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for filename in sorted(filenames):
            if not filename.endswith(".py"):
                continue
            path = os.path.join(dirpath, filename)
            rel = os.path.relpath(path, os.path.dirname(root))
            module_private = any(part.startswith("_") and part != "__init__.py"
                                 for part in rel.split(os.sep))
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), filename=path)
            for name, private, fn in _functions(tree):
                for where, annotation in _annotations(fn):
                    hit = Hit(rel, annotation.lineno, name, where, ast.unparse(annotation))
                    if _mentions_any(annotation):
                        any_hits.append(hit)
                    if not (private or module_private) and _bare_containers(annotation):
                        bare_hits.append(hit)
    return any_hits, bare_hits


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", choices=("any", "bare"), help="print every hit of one count")
    args = parser.parse_args(argv)
    any_hits, bare_hits = scan()
    if args.list:
        for h in any_hits if args.list == "any" else bare_hits:
            print(f"{h.path}:{h.line}: {h.function} {h.where}: {h.annotation}")
    print(f"Any in signatures: {len(any_hits)}; bare dict/list in public signatures: "
          f"{len(bare_hits)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
