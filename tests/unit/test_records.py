"""``tandem._core.records.record`` makes the class ``@dataclass(frozen=True)`` makes: each
behaviour below is checked against a real frozen dataclass of the same fields."""

from __future__ import annotations

import copy
import dataclasses
import inspect
import math
import pickle
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pytest

from tandem._core.records import record


def _define(decorate: Any) -> type:
    @decorate
    class P:
        a: int
        b: str = "x"
        c: float = 1.5
        d: dict[str, int] = field(default_factory=dict)
        e: int = field(default=3, compare=False, repr=False)
        kind: ClassVar[str] = "k"
        hidden: int = field(default=7, init=False)

    return P


@pytest.mark.parametrize("slots", [False, True])
def test_a_record_behaves_as_a_frozen_dataclass(slots):
    plain = _define(dataclass(frozen=True, slots=slots))
    fast = _define(record(slots=slots))
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(plain)]
    assert fast.__match_args__ == plain.__match_args__ == ("a", "b", "c", "d", "e")
    assert str(inspect.signature(fast)) == str(inspect.signature(plain))  # "d=<factory>" too
    for cls in (plain, fast):
        x = cls(1)
        assert (x.a, x.b, x.c, x.d, x.e, x.hidden, x.kind) == (1, "x", 1.5, {}, 3, 7, "k")
        assert x.d is not cls(1).d  # a fresh dict from the factory each time
        assert cls(1, "y", 2.0, {"k": 1}, 9).d == {"k": 1}
    assert repr(fast(1, "y")) == repr(plain(1, "y")) == "_define.<locals>.P(a=1, b='y', c=1.5, d={}, hidden=7)"
    assert fast(1) == fast(1, e=4) and fast(1) != fast(2) and fast(1) != plain(1)
    for cls in (plain, fast):  # identity first, then ==, as tuples compare
        assert cls(1, c=float("nan")) != cls(1, c=float("nan")) and cls(1, c=math.nan) == cls(1, c=math.nan)
    assert hash(fast(1, "y", d=())) == hash(plain(1, "y", d=()))
    assert hash(fast(1, d=(), e=1)) == hash(fast(1, d=(), e=2))  # e is not compared
    for cls in (plain, fast):
        with pytest.raises(TypeError, match="unhashable type: 'dict'"):
            hash(cls(1))
    for cls in (plain, fast):
        x = cls(1)
        with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign to field 'a'"):
            x.a = 2
        with pytest.raises(dataclasses.FrozenInstanceError):
            del x.b
        assert dataclasses.replace(x, b="z") == cls(1, "z")
        assert dataclasses.asdict(x) == {"a": 1, "b": "x", "c": 1.5, "d": {}, "e": 3, "hidden": 7}
        assert dataclasses.is_dataclass(x)
        assert cls.__dataclass_params__.frozen and cls.__dataclass_params__.eq
        assert copy.deepcopy(x) == x
        match x:
            case cls(a, b):
                assert (a, b) == (1, "x")
            case _:
                pytest.fail("no match")
    assert hasattr(fast, "__slots__") == hasattr(plain, "__slots__") == slots


@pytest.mark.parametrize("slots", [False, True])
def test_a_mutable_record_behaves_as_a_dataclass(slots):
    plain = _define(dataclass(slots=slots))
    fast = _define(record(frozen=False, slots=slots))
    for cls in (plain, fast):
        x = cls(1)
        x.a = 2
        assert x == cls(2) and x != cls(3) and repr(x).endswith("P(a=2, b='x', c=1.5, d={}, hidden=7)")
        assert cls.__hash__ is None and not cls.__dataclass_params__.frozen
        assert copy.deepcopy(x) == x and dataclasses.replace(x, b="y").b == "y"
    with pytest.raises(TypeError, match="cannot inherit non-frozen dataclass from a frozen one"):
        @record(frozen=False)
        class Sub(_Event):
            extra: int = 0


@record(slots=True)
class _Frame:
    rank: int
    batch: list[int]


@record
class _Event:
    kind: ClassVar[str] = "ev"
    job_id: str
    n: int = 0

    def __post_init__(self) -> None:
        if self.n < 0:
            raise ValueError(f"n must be >= 0, got {self.n}")


@dataclass(frozen=True, slots=True)
class _FrameAsDataclass:
    rank: int
    batch: list[int]


def test_init_is_compiled_when_first_used_and_is_then_the_real_one():
    @record(slots=True)
    class Lazy:
        a: int
        b: int = 2

    assert not inspect.isfunction(Lazy.__dict__["__init__"])  # nothing compiled yet
    assert str(inspect.signature(Lazy)) == "(a: 'int', b: 'int' = 2) -> None"  # compiled now
    assert inspect.isfunction(Lazy.__dict__["__init__"])
    assert Lazy.__init__.__qualname__.endswith("Lazy.__init__")

    @record
    class Lazier:
        a: int

    class Plain(Lazier):  # built through a subclass: the record's class gets its __init__
        pass

    assert Plain(1).a == 1 and inspect.isfunction(Lazier.__dict__["__init__"])
    assert "__init__" not in Plain.__dict__


def test_pickles_are_those_of_the_dataclass_and_post_init_runs():
    frame = _Frame(1, [2, 3])
    assert pickle.loads(pickle.dumps(frame)) == frame
    assert frame.__getstate__() == _FrameAsDataclass(1, [2, 3]).__getstate__()
    assert pickle.loads(pickle.dumps(_Event("j", 2))) == _Event("j", 2)
    with pytest.raises(ValueError, match="n must be >= 0, got -1"):
        _Event("j", -1)
    assert _Event.kind == "ev" and _Event.__doc__ == "_Event(kind, job_id, n)"

    @record
    class Sub(_Event):
        extra: str = "e"

    assert Sub("j").extra == "e" and Sub("j") != _Event("j")
    with pytest.raises(dataclasses.FrozenInstanceError):
        Sub("j").extra = "f"


def test_methods_the_class_defines_stay_as_with_dataclass():
    for decorate in (dataclass(frozen=True), record):
        @decorate
        class Shown:
            x: int

            def __repr__(self) -> str:
                return f"<{self.x}>"

        @decorate
        class Same:
            x: int

            def __eq__(self, other: object) -> bool:
                return True

        assert repr(Shown(1)) == "<1>" and Shown(1) == Shown(1) and Shown(1) != Shown(2)
        assert Same(1) == Same(2) and Same(1) == 3 and hash(Same(1)) == hash(Same(1))


def test_what_record_does_not_make_is_refused_when_defined():
    with pytest.raises(TypeError, match="cannot overwrite attribute __setattr__ in class"):
        @record
        class A:
            x: int

            def __setattr__(self, name: str, value: object) -> None:
                pass

    with pytest.raises(TypeError, match="keyword-only: not supported"):
        @record
        class B:
            x: int = field(kw_only=True)
