"""``encode_json`` / ``decode_json``: orjson where it gives the json module's value, the
json module otherwise (every report row a train server stores and streams passes here)."""

from __future__ import annotations

import dataclasses
import datetime
import json
import math

import numpy as np
import pytest

from tandem.jobs.store import base
from tandem.jobs.store.base import decode_json, encode_json


def _same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


VALUES = [
    {"i": 3, "loss": 0.25, "done": False, "name": "t"},
    {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")},
    {"none": None, "text": "a null in a string"},
    {"big": 2**70, "neg": -(2**64)},
    {1: "int key", "2": [1, (2, 3)]},
    {"text": "café ☃ \n \"q\"", "small": 1e-05, "huge": 1.7976931348623157e308, "z": -0.0},
    {"np": np.float32(1.5), "arr": np.arange(3), "npnan": np.float64("nan"), "set": {2, 1}},
    [1, 2.5, "x", None, True],
]


@pytest.mark.parametrize("value", VALUES)
def test_a_round_trip_gives_the_json_modules_value(value):
    ours = decode_json(encode_json(value))
    theirs = json.loads(json.dumps(value, default=base._json_default))
    assert _same(ours, theirs), (ours, theirs)


def test_nan_and_infinities_are_kept_as_the_json_module_writes_them():
    text = encode_json({"a": float("nan"), "b": float("inf"), "c": 1})
    assert text == '{"a":NaN,"b":Infinity,"c":1}'  # orjson would have written null
    assert encode_json({"i": 1, "x": 0.5}) == '{"i":1,"x":0.5}'


@pytest.mark.parametrize("bad", [object(), datetime.datetime(2026, 1, 1),
                                 dataclasses.make_dataclass("Point", ["x"])(1)])
def test_what_json_cannot_store_is_refused_with_the_same_message(bad):
    with pytest.raises(TypeError, match="cannot store a value of type .* as JSON"):
        encode_json({"v": bad})


def test_without_orjson_the_json_module_does_the_same(monkeypatch):
    monkeypatch.setattr(base, "_orjson", None)
    for value in VALUES:
        ours = decode_json(encode_json(value))
        assert _same(ours, json.loads(json.dumps(value, default=base._json_default)))
    assert decode_json(b"[1]") == [1] and decode_json(None) is None
