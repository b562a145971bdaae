"""Names a package exports without importing the modules behind them until first use.

A package ``__init__`` that re-exports its public API imports every module behind it, and
everything those import, when a program only needs one name (``from tandem import tune``
then ``tune.report``). ``lazy_exports`` gives the package a module-level ``__getattr__``
(PEP 562) that imports a name's module on first access and keeps the name in the package's
namespace, so the next access costs a dict lookup; ``from pkg import name``, ``pkg.name``,
``from pkg import *`` and ``dir(pkg)`` all behave as with eager imports. Type checkers
read the same names from an ``if TYPE_CHECKING:`` block of eager imports, which
``tests/unit/test_lazy_imports.py`` checks against the table.

What a fresh ``from tandem import tune`` may import is pinned by that test (no numpy,
pandas, pyarrow, SQL, HTTP client or server code), so an eager import cannot come back
unnoticed.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable, Mapping


def lazy_exports(
    package: str,
    namespace: dict[str, object],
    exports: Mapping[str, str],
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``.

    Args:
        package: the package's ``__name__``.
        namespace: its ``globals()``: a name is stored there once imported.
        exports: public name -> the module that defines it (absolute, or relative to
            ``package`` when it starts with ``.``); ``"module:other"`` exports that
            module's ``other`` under the public name.

    A name that is not exported but is a submodule of ``package`` is imported as such, as
    the eager imports made every submodule an attribute (``tune.schedulers.ASHAScheduler``
    after ``from tandem import tune``, as Ray allows).
    """
    table = {name: (package + module if module.startswith(".") else module)
             for name, module in exports.items()}

    def __getattr__(name: str) -> object:
        module = table.get(name)
        if module is not None:
            module, _, attr = module.partition(":")
            value = getattr(importlib.import_module(module), attr or name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}"):
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(table))

    return __getattr__, __dir__
