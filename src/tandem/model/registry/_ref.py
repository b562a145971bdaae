"""``ModelRef``: a name and a version or alias (``"digits"``, ``"digits@3"``, ``"digits@prod"``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tandem._core.errors import ConfigError, TandemError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
ALIAS_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")


class ModelNotFoundError(TandemError, KeyError):
    """A registry name, version or alias that does not exist (the message lists what does)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class RegistryError(TandemError, ValueError):
    """A registry operation refused (a model that fails its checks, an aliased version...)."""


def check_name(name: object) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(
            f"model name {name!r} is not allowed: use 1-128 letters, digits, '_', '-' or '.', "
            f"starting with a letter or digit (e.g. 'digits' or 'digits-mlp')."
        )
    return name


def check_alias(alias: object) -> str:
    if not isinstance(alias, str) or not ALIAS_RE.match(alias) or alias.lower() == "latest":
        raise ConfigError(
            f"alias {alias!r} is not allowed: use a word that starts with a letter, such as "
            f"'prod' or 'staging' (not a number, which would read as a version, nor 'latest')."
        )
    return alias


@dataclass(frozen=True)
class ModelRef:
    """A registered model: ``ModelRef("digits", 3)``, ``ModelRef("digits", alias="prod")``,
    or ``ModelRef("digits")`` for the latest version. ``str(ref)`` is ``"digits@3"``.
    ``ModelRef.parse("digits@prod")`` reads the string forms."""

    name: str
    version: int | None = None
    alias: str | None = None

    def __post_init__(self) -> None:
        check_name(self.name)
        if self.version is not None and (
            isinstance(self.version, bool) or not isinstance(self.version, int) or self.version < 1
        ):
            raise ConfigError(
                f"ModelRef version {self.version!r}: versions are whole numbers from 1."
            )
        if self.version is not None and self.alias is not None:
            raise ConfigError(
                f"ModelRef({self.name!r}, version={self.version}, alias={self.alias!r}): give a "
                f"version or an alias, not both."
            )
        if self.alias is not None:
            check_alias(self.alias)

    @classmethod
    def parse(cls, text: str | ModelRef) -> ModelRef:
        """``"name"``, ``"name@3"``, ``"name@prod"`` or ``"name@latest"``."""
        if isinstance(text, ModelRef):
            return text
        if not isinstance(text, str):
            raise ConfigError(
                f"a model reference is a string such as 'digits', 'digits@3' or 'digits@prod', "
                f"or a ModelRef; got {text!r} ({type(text).__name__})."
            )
        name, sep, tail = text.strip().partition("@")
        if not sep:
            return cls(name)
        if not tail:
            raise ConfigError(
                f"model reference {text!r} ends with '@': write 'name@VERSION' (e.g. "
                f"'{name}@3') or 'name@ALIAS' (e.g. '{name}@prod')."
            )
        if tail.isdigit():
            return cls(name, int(tail))
        if tail.lower() == "latest":
            return cls(name)
        return cls(name, alias=tail)

    def __str__(self) -> str:
        if self.version is not None:
            return f"{self.name}@{self.version}"
        if self.alias is not None:
            return f"{self.name}@{self.alias}"
        return self.name
