"""A fresh program that tunes or trains imports only what one trial needs (issue 25: the
cold start), and the lazily exported names are the ones type checkers see.

The heavy libraries are imported where they are used (NumPy when a value is drawn from a
search space, an HTTP client when a server is asked, asyncio for an ``async def`` train
function); a package ``__init__`` imports a name's module on first use
(``tandem._core.lazy``). These tests pin it, so an eager import cannot creep back."""

from __future__ import annotations

import ast
import importlib
import json
import os
import subprocess
import sys

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "src")

#: Never needed to run one trivial trial, on the driver or in a worker.
HEAVY = ("numpy", "pandas", "pyarrow", "sqlalchemy", "alembic", "pydantic", "rich", "yaml",
         "fsspec", "torch", "ray", "optuna", "fastapi", "uvicorn", "httpx", "mlflow", "wandb",
         "tensorboardX", "sklearn", "scipy", "urllib.request", "http.client", "ssl", "asyncio",
         "zipfile", "email", "tandem.server", "tandem.model", "tandem.tune.search.optuna",
         "tandem.tune.schedulers.pbt", "tandem.tune.integration.mlflow",
         "tandem.tune.integration.wandb", "tandem.cluster.ray", "tandem.jobs.client.remote",
         "psutil", "concurrent.futures")

_PROBE = """
import json, sys
def loaded():
    return sorted(m for m in {heavy!r} if m in sys.modules)
out = {{}}
{steps}
print(json.dumps(out))
"""


def _probe(steps: str) -> dict[str, list[str]]:
    code = _PROBE.format(heavy=HEAVY, steps=steps)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result: dict[str, list[str]] = json.loads(proc.stdout.splitlines()[-1])
    return result


def test_a_program_that_tunes_or_trains_loads_nothing_heavy_before_fit():
    out = _probe("""
from tandem import tune
out["import tune"] = loaded()
from tandem import train
import tandem
out["import train"] = loaded()
tuner = tune.Tuner(lambda config: tune.report({"x": 1}), param_space={"a": 1, "b": [2, 3]},
                   tune_config=tune.TuneConfig(num_samples=2),
                   run_config=tune.RunConfig(name="x", storage_path="/tmp/unused"))
config = train.ScalingConfig(num_workers=2)
out["Tuner and configs built"] = loaded()
out["plain dataclasses"] = sorted(
    f"{m.__name__}.{v.__name__}" for m in list(sys.modules.values())
    if m.__name__.startswith("tandem") for v in list(vars(m).values())
    if isinstance(v, type) and v.__module__ == m.__name__ and "__dataclass_fields__" in vars(v)
    and "__record_fields__" not in vars(v))
from tandem.tune.search.basic_variant import BasicVariantGenerator
gen = BasicVariantGenerator()
gen.set_search_properties(None, None, {"a": 1, "g": tune.grid_search([1, 2])})
out["constant space resolved"] = [gen.suggest("t1"), gen.suggest("t2"), loaded()]
from tandem.train._internal.worker import WorkerTask
from tandem.tune import session
out["worker side"] = loaded()
tune.uniform(0, 1).sample()
out["a value drawn"] = "numpy" in sys.modules
""")
    assert out["import tune"] == []
    assert out["import train"] == []
    assert out["Tuner and configs built"] == []
    # the classes of the typed frames, events and descriptions are records
    # (tandem._core.records: a sixth of a dataclass's cost to define); these are not yet
    assert set(out["plain dataclasses"]) <= {
        "tandem.cluster._pool.WarmPoolConfig",
        "tandem.train._internal.contexts.LocalTrainContext",  # init=False
        "tandem.train.api.result.Result",  # init=False
        "tandem.tune.controller.ExperimentOutput", "tandem.tune.controller.Resumed",
        "tandem.tune.controller.TrialJobs", "tandem.tune.controller.TrialStreams",
        "tandem.tune.controller.TrialLimits",
        "tandem.tune.controller.TrialSearch",
    }, out["plain dataclasses"]
    assert out["constant space resolved"] == [{"a": 1, "g": 1}, {"a": 1, "g": 2}, []]
    assert out["worker side"] == []
    assert out["a value drawn"] is True  # NumPy comes when it is used


def test_seeded_draws_are_unchanged_by_the_lazy_seed():
    """``np.random.seed`` before the generator is built fixes its draws (Ray's FAQ), and a
    generator built before NumPy was loaded draws its seed when it first samples."""
    out = _probe("""
import numpy as np
from tandem import tune
from tandem.tune.search.basic_variant import BasicVariantGenerator
def draws():
    gen = BasicVariantGenerator()
    gen.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
    gen.set_num_samples(3)
    return [gen.suggest(f"t{i}")["a"] for i in range(3)]
np.random.seed(7)
first = draws()
np.random.seed(7)
out["same"] = [first == draws()]
""")
    assert out["same"] == [True]
    out = _probe("""
from tandem import tune
from tandem.tune.search.basic_variant import BasicVariantGenerator
gen = BasicVariantGenerator()  # NumPy not loaded yet: the seed is drawn at the first sample
import numpy as np
np.random.seed(7)
gen.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
gen.set_num_samples(2)
a = [gen.suggest("t0")["a"], gen.suggest("t1")["a"]]
np.random.seed(7)
gen = BasicVariantGenerator()
gen.set_search_properties(None, None, {"a": tune.uniform(0, 1)})
gen.set_num_samples(2)
out["same"] = [a == [gen.suggest("t0")["a"], gen.suggest("t1")["a"]]]
""")
    assert out["same"] == [True]


LAZY_PACKAGES = ("tandem", "tandem.cluster", "tandem.jobs", "tandem.jobs.client", "tandem.model",
                 "tandem.train", "tandem.tune", "tandem.tune.schedulers", "tandem.tune.search")


def _type_checking_names(package: str) -> dict[str, str]:
    """name -> module of the imports under ``if TYPE_CHECKING:`` in the package's source."""
    path = os.path.join(SRC, *package.split("."), "__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    for alias in stmt.names:
                        names[alias.asname or alias.name] = str(stmt.module)
    return names


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_every_lazy_name_is_the_one_type_checkers_see(package):
    """Each public name resolves, to the object its module defines, and type checkers see
    it (an ``if TYPE_CHECKING:`` import of the same module); ``dir()`` lists it."""
    code = f"import {package} as p; print(sorted(n for n in p.__all__ if n in vars(p)))"
    fresh = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120, check=True).stdout
    pkg = importlib.import_module(package)
    seen = _type_checking_names(package)
    defined_here = set(ast.literal_eval(fresh))  # constants (TRAIN_DATASET_KEY), not imported
    assert set(pkg.__all__) - defined_here <= set(seen), "names type checkers do not see"
    # these need their libraries (Optuna, Ax, scikit-learn...): tested where they are used
    library_searchers = {*getattr(pkg, "_LAZY", {}), "PB2"}
    for name, module in seen.items():
        if name in library_searchers:
            continue
        assert getattr(pkg, name) is getattr(importlib.import_module(module), name), name
    assert set(pkg.__all__) <= set(dir(pkg))
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        pkg.no_such_name  # noqa: B018


def test_submodules_stay_reachable_as_attributes():
    import tandem.tune as tune

    assert tune.schedulers.ASHAScheduler.__name__ == "ASHAScheduler"
    from tandem.tune.search.concurrency import ConcurrencyLimiter

    assert tune.search.ConcurrencyLimiter is ConcurrencyLimiter
    import tandem.jobs

    assert tandem.jobs.list is tandem.jobs.runtime.list_jobs


def test_the_zygote_and_the_worker_code_load_nothing_heavy():
    """The zygote's own start is on a fresh program's critical path (its first worker forks
    from it): neither its module nor the worker code it preloads loads a heavy module
    (``concurrent.futures`` and ``psutil`` included, which only the driver's side uses),
    nor the embedded job service."""
    out = _probe("""
import tandem.cluster._zygote
out["zygote"] = loaded()
# the worker handshake's HMAC is written over hmac (tandem.cluster._wire): these two cost
# ~20 ms of the zygote's start
out["handshake"] = [m for m in ("multiprocessing", "secrets") if m in sys.modules]
from tandem.train.early import WORKER_MODULES
from tandem.tune._early import TRIAL_MODULES
for name in (*WORKER_MODULES, *TRIAL_MODULES):
    __import__(name)
out["preloaded"] = loaded()
out["job service"] = [m for m in ("tandem.jobs.service", "tandem.jobs.admission")
                      if m in sys.modules]
""")
    # a worker's nested job service is not the embedded one (its admission and scheduler)
    assert out == {"zygote": [], "handshake": [], "preloaded": [], "job service": []}
