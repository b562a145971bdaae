"""Frozen dataclasses that cost a sixth of ``@dataclass(frozen=True)`` to define.

``@dataclass(frozen=True)`` compiles six methods from source for each class when its module
is imported (``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__``,
``__delattr__``: about 1 ms of CPU per class). The typed frames, events and descriptions a
program imports to run one trial are ~75 such classes, ~0.1 s of a fresh process's
0.2 s of imports (issue 25: the cold start; docs/benchmarks.md). ``record`` makes the same
class: a real dataclass (``dataclasses.fields``, ``replace``, ``asdict``, ``is_dataclass``,
``match`` on positional fields and pickling work as before), frozen, compared, hashed and
shown as ``@dataclass(frozen=True)`` does, but only ``__init__`` is compiled (its signature
is the fields', and a frame is built on every report), and only when the class is first
built (``_LazyInit``); the other methods are shared functions that read the class's field
names.

    @record                     # @dataclass(frozen=True)
    @record(slots=True)         # @dataclass(frozen=True, slots=True)

Supported: defaults, ``field(default=..., default_factory=..., init=, repr=, compare=,
hash=)``, ``ClassVar`` annotations, ``__post_init__``, subclassing another record. Anything
else (``InitVar``, ``kw_only``) is refused when the class is defined; use ``@dataclass``
there. Type checkers see a frozen dataclass (``typing.dataclass_transform``).
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from typing import TypeVar, dataclass_transform, overload

__all__ = ["record"]

_T = TypeVar("_T", bound=type)

class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # what the signature of a dataclass's __init__ shows


#: stands for "no value given" in a generated ``__init__`` of a field with a factory
_FACTORY = _Factory()


def _names(self: object, kind: str) -> tuple[str, ...]:
    names: tuple[str, ...] = getattr(type(self), kind)
    return names


def _repr(self: object) -> str:
    inner = ", ".join(f"{n}={getattr(self, n)!r}" for n in _names(self, "__record_repr__"))
    return f"{type(self).__qualname__}({inner})"


def _eq(self: object, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    names = _names(self, "__record_compare__")
    return tuple(getattr(self, n) for n in names) == tuple(getattr(other, n) for n in names)


def _hash(self: object) -> int:
    return hash(tuple(getattr(self, n) for n in _names(self, "__record_hash__")))


def _frozen_field(self: object, name: str) -> bool:
    cls = type(self)
    return "__record_fields__" in cls.__dict__ or name in _names(self, "__record_fields__")


def _setattr(self: object, name: str, value: object) -> None:
    if _frozen_field(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot assign to field {name!r}")
    object.__setattr__(self, name, value)  # a plain subclass's own attribute, as dataclasses


def _delattr(self: object, name: str) -> None:
    if _frozen_field(self, name):
        raise dataclasses.FrozenInstanceError(f"cannot delete field {name!r}")
    object.__delattr__(self, name)


def _getstate(self: object) -> list[object]:
    return [getattr(self, n) for n in _names(self, "__record_fields__")]


def _setstate(self: object, state: list[object]) -> None:
    for name, value in zip(_names(self, "__record_fields__"), state, strict=True):
        object.__setattr__(self, name, value)


def _make_init(cls: type, fields: list[dataclasses.Field[object]],
               frozen: bool) -> Callable[..., None]:
    """``__init__`` of ``cls``, compiled from source as ``dataclasses`` does (one compile)."""
    def assign(name: str, value: str) -> str:
        # a frozen class's own __setattr__ refuses; a mutable one's assigns plainly, as
        # dataclasses does (a property or a __setattr__ of the class sees it)
        return f"    __set(self, {name!r}, {value})" if frozen else f"    self.{name} = {value}"

    params: list[str] = []
    body: list[str] = []
    env: dict[str, object] = {"__set": object.__setattr__, "__FACTORY": _FACTORY}
    for i, f in enumerate(fields):
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            env[f"__factory{i}"] = f.default_factory
        if not f.init:
            if has_factory:
                value = f"__factory{i}()"
            elif f.default is not dataclasses.MISSING:
                env[f"__default{i}"] = f.default
                value = f"__default{i}"
            else:
                continue
            body.append(assign(f.name, value))
            continue
        if has_factory:
            params.append(f"{f.name}=__FACTORY")
            body.append(assign(f.name, f"__factory{i}() if {f.name} is __FACTORY else {f.name}"))
            continue
        if f.default is not dataclasses.MISSING:
            env[f"__default{i}"] = f.default
            params.append(f"{f.name}=__default{i}")
        else:
            params.append(f.name)
        body.append(assign(f.name, f.name))
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}):\n" + ("\n".join(body) or "    pass")
    namespace: dict[str, Callable[..., None]] = {}
    exec(compile(source, f"<record {cls.__qualname__}>", "exec"), env, namespace)  # noqa: S102
    init: Callable[..., None] = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    # the fields' annotations, as the dataclass's __init__ carries them (its signature)
    init.__annotations__ = {**{f.name: f.type for f in fields if f.init}, "return": None}
    init.__module__ = cls.__module__
    return init


class _LazyInit:
    """A record's ``__init__`` until it is first looked up: then it compiles the real one and
    puts it in the class in its place. Most classes a program imports are never built in it
    (a frame or event of a path it never takes), so they never pay the compile; the first
    ``Cls(...)``, ``Cls.__init__`` or ``inspect.signature(Cls)`` sees the real function."""

    __slots__ = ("cls", "fields", "frozen")

    def __init__(self, cls: type, fields: list[dataclasses.Field[object]], frozen: bool) -> None:
        self.cls, self.fields, self.frozen = cls, fields, frozen

    def __get__(self, instance: object, owner: type | None = None) -> object:
        init = self.cls.__dict__["__init__"]
        if init is self:  # (another thread may have replaced it meanwhile: then use that)
            init = _make_init(self.cls, self.fields, self.frozen)
            type.__setattr__(self.cls, "__init__", init)
        return init if instance is None else types.MethodType(init, instance)


def _build(cls: type, frozen: bool, slots: bool) -> type:
    if frozen:
        for name in ("__setattr__", "__delattr__"):
            if name in cls.__dict__:  # as dataclasses refuses for a frozen class
                raise TypeError(f"cannot overwrite attribute {name} in class {cls.__qualname__}")
    # what the class defines itself stays, as with @dataclass (an __eq__ alone leaves
    # __hash__ None in the class: that one is made)
    own = {name for name in ("__init__", "__repr__", "__eq__") if name in cls.__dict__}
    class_hash = cls.__dict__.get("__hash__", dataclasses.MISSING)
    if not (class_hash is dataclasses.MISSING or (class_hash is None and "__eq__" in own)):
        own.add("__hash__")
    if not cls.__doc__:
        # dataclasses would compute the signature with inspect; the field names are enough
        cls.__doc__ = f"{cls.__name__}({', '.join(cls.__dict__.get('__annotations__', {}))})"
    for base in cls.__mro__[1:-1]:
        if dataclasses.is_dataclass(base) and "__record_fields__" not in base.__dict__:
            raise TypeError(f"@record class {cls.__qualname__} subclasses the dataclass "
                            f"{base.__qualname__}: make it a @record too, or use @dataclass")
    # a dataclass that generates nothing: its fields, __match_args__ and slots. A record's
    # subclass says whether it is frozen, so that dataclasses refuses a frozen class on a
    # mutable base and the reverse; the two methods that costs are replaced below.
    subclass = any("__record_fields__" in base.__dict__ for base in cls.__mro__[1:])
    cls = dataclasses.dataclass(cls, init=False, repr=False, eq=False,
                                frozen=frozen and subclass, slots=slots)
    fields = list(dataclasses.fields(cls))
    for f in fields:
        if f.kw_only:
            raise TypeError(f"@record field {cls.__qualname__}.{f.name} is keyword-only: "
                            f"not supported, use @dataclass(kw_only=True)")
    initvar = getattr(dataclasses, "_FIELD_INITVAR")  # noqa: B009 (private: no stub)
    for f in getattr(cls, "__dataclass_fields__").values():  # noqa: B009
        if getattr(f, "_field_type") is initvar:  # noqa: B009
            raise TypeError(f"@record field {cls.__qualname__}.{f.name} is an InitVar: not "
                            f"supported, use @dataclass")
    made: dict[str, object] = {
        "__record_fields__": tuple(f.name for f in fields),  # in order: the pickled state
        "__record_repr__": tuple(f.name for f in fields if f.repr),
        "__record_compare__": tuple(f.name for f in fields if f.compare),
        "__record_hash__": tuple(f.name for f in fields
                                 if (f.compare if f.hash is None else f.hash)),
    }
    if "__init__" not in own:
        made["__init__"] = _LazyInit(cls, fields, frozen)
    if "__repr__" not in own:
        made["__repr__"] = _repr
    if "__eq__" not in own:
        made["__eq__"] = _eq
    if "__hash__" not in own:  # a mutable dataclass that compares is unhashable
        made["__hash__"] = _hash if frozen else None
    if frozen:
        made.update(__setattr__=_setattr, __delattr__=_delattr)
        if slots:  # pickling sets the fields with object.__setattr__, as dataclasses
            made.update(__getstate__=_getstate, __setstate__=_setstate)
    for name, value in made.items():
        setattr(cls, name, value)
    params = getattr(cls, "__dataclass_params__")  # noqa: B009
    params.init = params.repr = params.eq = True  # what @dataclass(frozen=...) records
    params.frozen = frozen
    return cls


@overload
def record(cls: _T, /) -> _T: ...


@overload
def record(*, frozen: bool = True, slots: bool = False) -> Callable[[_T], _T]: ...


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls: _T | None = None, /, *, frozen: bool = True,
           slots: bool = False) -> _T | Callable[[_T], _T]:
    """``@dataclass(frozen=True)`` (``frozen=False`` for ``@dataclass``, ``slots=True`` for
    ``slots=True``) at a fraction of the cost of defining it (module docstring)."""
    if cls is None:
        return lambda c: _build(c, frozen, slots)  # type: ignore[return-value]
    return _build(cls, frozen, slots)
