"""One helper says "this needs extra X": it names the extra and the pip line, before
anything starts, and every optional import at an entry point goes through it."""

from __future__ import annotations

import ast
import os

import pytest

import tandem
from tandem._core import extras
from tandem._core.errors import TandemError
from tests.unit.test_dependencies import PROVIDED_BY, SRC, _name, declared


def test_require_extras_names_the_extras_and_the_pip_line(monkeypatch):
    monkeypatch.setitem(extras.EXTRA_MODULES, "server", ("fastapi", "no_such_module_a"))
    monkeypatch.setitem(extras.EXTRA_MODULES, "plot", ("no_such_module_b",))
    tandem.require_extras("torch", what="nothing missing")  # installed here: no error
    with pytest.raises(tandem.MissingExtraError) as e:
        tandem.require_extras("torch", "server", "plot", what="examples/x.py")
    err = e.value
    assert isinstance(err, ImportError) and isinstance(err, TandemError)
    assert str(err) == (
        "examples/x.py needs the [server], [plot] extras of tandem, and no_such_module_a, "
        "no_such_module_b are not installed here. Install them with: "
        'pip install "tandem-ml[server,plot]"')
    assert err.extras == ("server", "plot") and err.name == "no_such_module_a"
    with pytest.raises(ValueError, match="unknown extra 'servr'"):
        tandem.require_extras("servr", what="x")


def test_import_optional_raises_the_same_error():
    assert extras.import_optional("json", "server", "x").__name__ == "json"
    with pytest.raises(tandem.MissingExtraError,
                       match=r'^OptunaSearch needs the \[optuna\] extra of tandem, and '
                             r'no_such_pkg is not installed here\. Install it with: '
                             r'pip install "tandem-ml\[optuna\]"$'):
        extras.import_optional("no_such_pkg.sub", "optuna", "OptunaSearch")


def test_the_table_matches_pyproject():
    deps = declared()
    for extra, modules in extras.EXTRA_MODULES.items():
        assert extra in deps, f"EXTRA_MODULES names [{extra}], which pyproject.toml lacks"
        for module in modules:
            name = _name(PROVIDED_BY[module][0])[0]
            assert name in deps[extra], f"[{extra}] does not install {module} ({name})"


def test_install_hints_come_from_the_helper_only():
    """A ``pip install`` in an error message anywhere else would drift from pyproject."""
    found = []
    for folder, _, files in os.walk(SRC):
        for fname in files:
            path = os.path.join(folder, fname)
            if not fname.endswith(".py") or path.endswith(os.path.join("_core", "extras.py")):
                continue
            tree = ast.parse(open(path, encoding="utf-8").read())
            docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                          if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef,
                                            ast.AsyncFunctionDef))
                          and n.body and isinstance(n.body[0], ast.Expr)}
            for node in ast.walk(tree):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and "pip install" in node.value and id(node) not in docstrings):
                    found.append(f"{os.path.relpath(path, SRC)}:{node.lineno}")
    assert not found, f"install hints outside tandem._core.extras: {found}"
