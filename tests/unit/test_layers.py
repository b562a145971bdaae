"""The layer order of shared/DESIGN.md, enforced by import-linter's contracts."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


@pytest.mark.timeout(120)
def test_import_linter_contracts_hold():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    exe = shutil.which("lint-imports") or shutil.which("lint-imports", path=os.path.dirname(sys.executable))
    assert exe, "import-linter is part of the dev extra: pip install -e '.[dev]'"
    proc = subprocess.run([exe, "--no-cache"], cwd=root, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "KEPT" in proc.stdout and "BROKEN" not in proc.stdout


def test_import_tandem_is_light():
    code = ("import sys, tandem, tandem.train, tandem.train.torch; "
            "print(any(m == 'torch' or m.startswith('torch.') for m in sys.modules), 'pandas' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]  # the driver never needs torch or pandas to start


# -- what import-linter cannot see -------------------------------------------------------------
SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "src")
#: DESIGN.md's order, highest first; server and cli sit beside and may import any layer.
#: tandem.air (Ray's module paths, a thin compatibility layer) sits beside tandem.model:
#: both above tune, neither importing the other (import-linter's "model | air").
LAYERS = ["tandem.model", "tandem.tune", "tandem.train", "tandem.jobs", "tandem.cluster",
          "tandem._core"]
SIBLINGS = {"tandem.air": "tandem.model"}
BESIDE = ["tandem.server", "tandem.cli"]


def _rank(layer: str) -> int:
    return LAYERS.index(SIBLINGS.get(layer, layer))


def _layer(module: str) -> str | None:
    for name in LAYERS + list(SIBLINGS) + BESIDE:
        if module == name or module.startswith(name + "."):
            return name
    return None


def _sources() -> list[tuple[str, str, str]]:
    """(module, path, text) of every file of the package."""
    out = []
    for root, _dirs, files in os.walk(os.path.join(SRC, "tandem")):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(root, f)
                rel = os.path.relpath(path, SRC)[:-3].replace(os.sep, ".")
                with open(path, encoding="utf-8") as fh:
                    out.append((rel.removesuffix(".__init__"), path, fh.read()))
    return out


def _is_private_of_another_layer(source_layer: str | None, target: str) -> bool:
    layer = _layer(target)
    if layer is None or layer == source_layer:
        return False
    return any(part.startswith("_") for part in target[len(layer) + 1:].split(".") if part)


def test_no_layer_imports_another_layers_private_modules():
    """Every module named with a leading "_" below its layer (``_internal``, ``_files``,
    ``_zygote``...) is that layer's own: another layer imports its public modules only."""
    import ast

    bad = []
    for module, path, text in _sources():
        source_layer = _layer(module)
        for node in ast.walk(ast.parse(text, path)):
            targets: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for target in targets:
                if _is_private_of_another_layer(source_layer, target):
                    bad.append(f"{module} imports {target} ({path}:{node.lineno})")
                    break
    assert not bad, "private modules of another layer imported:\n" + "\n".join(bad)


def test_no_layer_reaches_up_by_name():
    """``importlib.import_module("tandem.<higher layer>...")`` (or ``__import__``) in a lower
    layer dodges the import-linter contract; it is refused the same."""
    import re

    pattern = re.compile(r"""(?:import_module|__import__)\(\s*[rbuf]*["'](tandem(?:\.\w+)+)""")
    bad = []
    for module, path, text in _sources():
        source_layer = _layer(module)
        if source_layer is None or source_layer in BESIDE:
            continue
        for m in pattern.finditer(text):
            target_layer = _layer(m.group(1))
            if target_layer is not None and target_layer not in BESIDE and \
                    target_layer != source_layer and _rank(target_layer) <= _rank(source_layer):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{module} loads {m.group(1)} by name ({path}:{line})")
            elif _is_private_of_another_layer(source_layer, m.group(1)):
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{module} loads {m.group(1)}, private to its layer ({path}:{line})")
    assert not bad, "a lower layer loads a higher one by name:\n" + "\n".join(bad)


def test_the_layer_checks_catch_what_they_are_for():
    assert _is_private_of_another_layer("tandem.tune", "tandem.train._internal.controller")
    assert _is_private_of_another_layer("tandem.jobs", "tandem.cluster._zygote")
    assert not _is_private_of_another_layer("tandem.train", "tandem.train._internal.nested")
    assert not _is_private_of_another_layer("tandem.tune", "tandem.train.api.files")


def test_air_sits_beside_model_above_tune():
    """tandem.air (Ray's ``ray.air`` paths) may import tune and train, never model, and no
    library layer imports it."""
    assert _rank("tandem.air") == _rank("tandem.model") < _rank("tandem.tune")
    assert _layer("tandem.air.integrations.mlflow") == "tandem.air"
    assert _is_private_of_another_layer("tandem.air", "tandem.tune._run")


# -- import circles ----------------------------------------------------------------------------
def _import_circles(graph) -> list[list[str]]:
    """The import circles of a grimp graph: its strongly connected components of more than one
    module (Tarjan's algorithm, iterative), each sorted, largest first."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []
    for root in modules:
        if root in index:
            continue
        work = [(root, iter(edges[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
    return sorted(circles, key=lambda c: (-len(c), c))


def _describe(graph, circle: list[str]) -> str:
    members = set(circle)
    lines = [" <-> ".join(circle)]
    for importer in circle:
        for imported in sorted(graph.find_modules_directly_imported_by(importer) & members):
            for d in graph.get_import_details(importer=importer, imported=imported):
                lines.append(f"    {importer} -> {imported} (line {d['line_number']}: "
                             f"{d['line_contents']})")
    return "\n".join(lines)


@pytest.mark.timeout(120)
def test_no_import_circles_even_inside_a_package():
    """DESIGN.md: no import circles, even inside a package. Every import counts: at module
    level, inside a function, under ``if TYPE_CHECKING`` (a circle of types is a circle of
    design), and a module importing its own package's ``__init__``. Break one with a Protocol
    the lower module declares, or by moving what both need below both."""
    import grimp

    graph = grimp.build_graph("tandem", cache_dir=None)
    circles = _import_circles(graph)
    assert not circles, "import circles:\n" + "\n".join(_describe(graph, c) for c in circles)


def test_the_circle_check_catches_what_it_is_for():
    import grimp

    graph = grimp.ImportGraph()
    for a, b in [("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d"),
                 ("p", "p.e"), ("p.e", "p"), ("p.d", "p.f")]:
        graph.add_import(importer=a, imported=b, line_number=1, line_contents=f"import {b}")
    assert _import_circles(graph) == [["p.a", "p.b", "p.c"], ["p", "p.e"]]
    assert "p.c -> p.a (line 1: import p.a)" in _describe(graph, ["p.a", "p.b", "p.c"])
