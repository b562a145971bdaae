"""Optional dependencies: which extra installs what, and one error that names the extra.

tandem's base install trains and tunes in-process; serving, the train server, Optuna, Ray
and the rest come with extras (``pip install "tandem-ml[server]"``). An entry point that
needs one checks for it before it starts anything, with ``require_extras``; code that
imports an optional package where it uses it goes through ``import_optional``. Either
raises ``MissingExtraError``, which says what needed it, what is missing and the pip
command. ``tests/unit/test_dependencies.py`` checks this table against pyproject.toml.
"""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from tandem._core.errors import TandemError

#: extra -> the top-level modules it provides that tandem imports (pyproject.toml's extras).
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "server": ("fastapi", "pydantic", "uvicorn", "httpx", "orjson"),
    "torch": ("torch", "sklearn"),
    "optuna": ("optuna",),
    "ray": ("ray",),
    "tensorboard": ("tensorboardX",),
    "mlflow": ("mlflow",),
    "wandb": ("wandb",),
    "plot": ("matplotlib",),
    "xgboost": ("xgboost", "sklearn"),
    "lightgbm": ("lightgbm", "sklearn"),
}


class MissingExtraError(TandemError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, message: str, *, extras: tuple[str, ...], missing: tuple[str, ...]):
        super().__init__(message)
        self.extras = extras
        self.missing = missing
        self.name = missing[0] if missing else None  # as ModuleNotFoundError has it


#: Keras 2 for TensorFlow's multi-worker fit: tf-keras declares the full ``tensorflow`` wheel as
#: a dependency, which [tensorflow] replaces with tensorflow-cpu (docs/backends.md)
TF_KERAS_INSTALL = "pip install --no-deps tf-keras==2.21.0"


def install_command(*extras: str) -> str:
    return f'pip install "tandem-ml[{",".join(extras)}]"'


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def missing_modules(extra: str) -> tuple[str, ...]:
    """The modules of ``extra`` that are not installed here."""
    if extra not in EXTRA_MODULES:
        raise ValueError(f"unknown extra {extra!r}; extras: {', '.join(sorted(EXTRA_MODULES))}")
    return tuple(m for m in EXTRA_MODULES[extra] if not _installed(m))


def require_extras(*extras: str, what: str) -> None:
    """Raises ``MissingExtraError`` unless every module of each extra is installed.

    Call it at an entry point, before anything starts (no job submitted, no process
    spawned), so a missing package is one clear message instead of a failure inside a job.

    Args:
        extras: names of pyproject.toml extras, e.g. ``"server"``.
        what: what needs them, as the user wrote it (``"model.serve()"``).
    """
    lacking = [(e, missing_modules(e)) for e in extras]
    lacking = [(e, m) for e, m in lacking if m]
    if not lacking:
        return
    names = tuple(e for e, _ in lacking)
    mods = tuple(dict.fromkeys(m for _, ms in lacking for m in ms))
    raise MissingExtraError(
        f"{what} needs the {', '.join(f'[{e}]' for e in names)} extra"
        f"{'s' if len(names) > 1 else ''} of tandem, and {', '.join(mods)} "
        f"{'is' if len(mods) == 1 else 'are'} not installed here. Install "
        f"{'it' if len(names) == 1 else 'them'} with: {install_command(*names)}",
        extras=names, missing=mods,
    )


def import_optional(module: str, extra: str, what: str) -> ModuleType:
    """``import module``, or ``MissingExtraError`` naming ``extra`` when it is missing."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        top = module.split(".")[0]
        if e.name is not None and e.name.split(".")[0] != top:
            raise  # the package is there; something it imports is not: show that
        raise MissingExtraError(
            f"{what} needs the [{extra}] extra of tandem, and {top} is not installed here. "
            f"Install it with: {install_command(extra)}",
            extras=(extra,), missing=(top,),
        ) from None
