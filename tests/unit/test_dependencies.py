"""Every third-party module tandem imports is installed by what pyproject.toml declares.

A fresh venv with ``pip install -e ".[all,dev]"`` (what ``.ci/run`` builds) must hold every
package ``src/tandem`` imports: a package the machine happens to carry must not hide a
missing declaration (``orjson`` once did). The walk reads every ``import`` in ``src/tandem``
(module level, inside functions, under ``try``); each top-level third-party name must be in
``PROVIDED_BY`` below, with the distribution that provides it and the extra that installs
it, and pyproject.toml must list that distribution in that extra (or in the base
dependencies). A module-level import outside the base dependencies is allowed only in the
package the extra is for (``tandem.server`` imports fastapi at the top; everything else
imports optional packages where it uses them, with an install hint).
"""

from __future__ import annotations

import ast
import importlib.metadata
import os
import re
import sys
from collections.abc import Iterator

import tomllib

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SRC = os.path.join(ROOT, "src", "tandem")
BASE = "base"

#: top-level module -> (the requirement that installs it, the extra it is declared in).
#: A requirement with an extra (``uvicorn[standard]``) means the module comes with it.
#: A new optional backend adds its row here and its extra in pyproject.toml.
PROVIDED_BY: dict[str, tuple[str, str]] = {
    "cloudpickle": ("cloudpickle", BASE),
    "fsspec": ("fsspec", BASE),
    "psutil": ("psutil", BASE),
    "rich": ("rich", BASE),
    "numpy": ("numpy", BASE),
    "pandas": ("pandas", BASE),
    "pyarrow": ("pyarrow", BASE),
    "sqlalchemy": ("sqlalchemy", BASE),
    "alembic": ("alembic", BASE),  # the stores' schema migrations
    "fastapi": ("fastapi", "server"),
    "starlette": ("starlette", "server"),
    "pydantic": ("pydantic", "server"),
    "uvicorn": ("uvicorn", "server"),
    "uvloop": ("uvicorn[standard]", "server"),
    "httpx": ("httpx", "server"),
    "orjson": ("orjson", "server"),
    "pathspec": ("pathspec", "server"),
    "psycopg": ("psycopg", "server"),
    "pynvml": ("nvidia-ml-py", "server"),
    "torch": ("torch", "torch"),
    "sklearn": ("scikit-learn", "torch"),
    "optuna": ("optuna", "optuna"),
    "ray": ("ray", "ray"),
    "tensorboardX": ("tensorboardX", "tensorboard"),
    "mlflow": ("mlflow", "mlflow"),
    "wandb": ("wandb", "wandb"),
    "matplotlib": ("matplotlib", "plot"),
    "xgboost": ("xgboost", "xgboost"),
    "lightgbm": ("lightgbm", "lightgbm"),
    "pytest": ("pytest", "dev"),  # tandem.jobs.testing: conformance suites for test code
    "typing_extensions": ("typing-extensions", BASE),
    "yaml": ("pyyaml", BASE),  # tune.logger.pretty_print
    "IPython": ("ipython", "notebook"),  # JupyterNotebookReporter
    "tensorflow": ("tensorflow-cpu", "tensorflow"),
    "jax": ("jax", "jax"),
    "lightning": ("lightning", "lightning"),
    "pytorch_lightning": ("pytorch-lightning", "lightning"),
    "transformers": ("transformers", "transformers"),
    "comet_ml": ("comet_ml", "comet"),
    "hyperopt": ("hyperopt", "hyperopt"),
    "bayes_opt": ("bayesian-optimization", "bayesopt"),
    "ax": ("ax-platform", "ax"),
    "nevergrad": ("nevergrad", "nevergrad"),
    "zoopt": ("zoopt", "zoopt"),
    "ConfigSpace": ("ConfigSpace", "bohb"),
    "hpbandster": ("hpbandster", "bohb"),
    "hebo": ("HEBO", "hebo"),
    "scipy": ("scipy", "pb2"),
}

#: modules that come with another distribution's requirement: their own distribution.
INDIRECT = {"uvloop": "uvloop"}

#: extras left out of [all] on purpose (they do not co-install with the others), and why.
OUTSIDE_ALL: dict[str, str] = {
    "hebo": "HEBO 0.3.5/0.3.6 pin numpy<1.25; 0.3.2 needs pymoo<0.6, which [ax]'s BoTorch rules "
            "out (docs/tune_search.md)",
}

#: the packages whose own modules may import an extra's packages at module level.
OWNED_BY: dict[str, tuple[str, ...]] = {
    "server": ("tandem.server",),
    "xgboost": ("tandem.train.xgboost",),
    "lightgbm": ("tandem.train.lightgbm",),
    "dev": ("tandem.jobs.testing",),
    "tensorflow": ("tandem.train.tensorflow", "tandem.air.integrations.keras"),
    "lightning": ("tandem.train.lightning", "tandem.tune.integration.pytorch_lightning"),
    "transformers": ("tandem.train.huggingface",),
    "comet": ("tandem.air.integrations.comet",),
    # packages that are themselves behind an extra's check (lightning, transformers, PB2's
    # lazy import in tandem.tune.schedulers): torch / scikit-learn come with those extras too
    "torch": ("tandem.train.lightning", "tandem.train.huggingface",
              "tandem.tune.schedulers.pb2_utils"),
    "pb2": ("tandem.tune.schedulers.pb2_utils",),
}


def _name(req: str) -> tuple[str, frozenset[str]]:
    """``"uvicorn[standard]>=0.27"`` -> ``("uvicorn", {"standard"})`` (names normalised)."""
    m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(?:\[([^\]]*)\])?", req)
    assert m, f"cannot read the requirement {req!r}"
    extras = frozenset(e.strip().lower() for e in (m.group(2) or "").split(",") if e.strip())
    return re.sub(r"[-_.]+", "-", m.group(1)).lower(), extras


def declared() -> dict[str, dict[str, frozenset[str]]]:
    """extra (or ``base``) -> {distribution: its extras}, from pyproject.toml."""
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        project = tomllib.load(f)["project"]
    out: dict[str, dict[str, frozenset[str]]] = {BASE: {}}
    for req in project["dependencies"]:
        name, extras = _name(req)
        out[BASE][name] = extras
    for extra, reqs in project["optional-dependencies"].items():
        out[extra] = {}
        for req in reqs:
            name, extras = _name(req)
            out[extra][name] = extras
    return out


def imports() -> Iterator[tuple[str, str, int, bool]]:
    """(module of src/tandem, top-level imported name, line, at module level unguarded)."""
    for folder, _, files in os.walk(SRC):
        for fname in sorted(files):
            if not fname.endswith(".py"):
                continue
            path = os.path.join(folder, fname)
            rel = os.path.relpath(path, os.path.dirname(SRC))[:-3].replace(os.sep, ".")
            module = rel.removesuffix(".__init__")
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read(), path)
            top_level = {id(n) for n in tree.body}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top == "tandem" or top in sys.stdlib_module_names:
                        continue
                    yield module, top, node.lineno, id(node) in top_level


def test_every_third_party_import_is_declared_in_its_extra():
    deps = declared()
    problems = []
    for module, top, line, _ in imports():
        where = f"{module} (line {line}) imports {top!r}"
        if top not in PROVIDED_BY:
            problems.append(f"{where}, which this test does not know: add it to the extra "
                            f"that needs it in pyproject.toml and to PROVIDED_BY here")
            continue
        req, extra = PROVIDED_BY[top]
        name, needs = _name(req)
        if extra not in deps:
            problems.append(f"{where}: pyproject.toml has no extra {extra!r}")
            continue
        found = deps[extra].get(name)
        if found is None:
            problems.append(f"{where}, but pyproject.toml's "
                            f"{'dependencies' if extra == BASE else f'[{extra}] extra'} does "
                            f"not list {name!r}: a fresh `pip install -e .[{extra}]` lacks it")
        elif not needs <= found:
            problems.append(f"{where}, which comes with {req!r}, but [{extra}] lists "
                            f"{name}[{','.join(sorted(found))}]")
    assert not problems, "\n".join(sorted(set(problems)))


def test_extras_reach_all_and_dev_installs_the_gates():
    deps = declared()
    all_extras = deps["all"]["tandem-ml"]
    for top, (_, extra) in PROVIDED_BY.items():
        if extra not in (BASE, "dev") and extra not in OUTSIDE_ALL:
            assert extra in all_extras, (
                f"{top} is in [{extra}], which [all] does not include: add it to [all], or "
                f"to OUTSIDE_ALL here with the reason (e.g. it does not co-install)")
    pinned = {name: req for name, req in ((_name(r)[0], r) for r in _requirements("dev"))}
    for gate in ("ruff", "mypy"):
        assert "==" in pinned.get(gate, ""), f"[dev] must pin {gate} exactly (the CI gate)"


def _requirements(extra: str) -> list[str]:
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return list(tomllib.load(f)["project"]["optional-dependencies"][extra])


def test_optional_packages_are_imported_where_used():
    """A module-level import of an optional package only in the package it is for: the
    rest of tandem imports without the extra, and the entry point says what to install."""
    bad = []
    for module, top, line, at_top in imports():
        extra = PROVIDED_BY.get(top, ("", BASE))[1]
        if not at_top or extra == BASE:
            continue
        owners = OWNED_BY.get(extra, ())
        if not any(module == o or module.startswith(o + ".") for o in owners):
            bad.append(f"{module} (line {line}) imports {top!r} at module level, but "
                       f"{top!r} comes with the [{extra}] extra: import it where it is used")
    assert not bad, "\n".join(bad)


def test_the_table_names_the_distributions_that_provide_the_modules():
    """Where a module is installed here, the table's distribution is the one providing it
    (so a wrong row cannot make the first test pass)."""
    providers = importlib.metadata.packages_distributions()
    wrong = []
    for top, (req, _) in PROVIDED_BY.items():
        name = INDIRECT.get(top) or _name(req)[0]
        found = {_name(p)[0] for p in providers.get(top, ())}
        if found and name not in found:
            wrong.append(f"{top} is provided by {sorted(found)}, not {name!r}")
    assert not wrong, wrong
