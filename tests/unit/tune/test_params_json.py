"""A trial's ``params.json`` is Ray's text, ``json.dumps(config, indent=2, sort_keys=True)``,
byte for byte, whether the config is flat (encoded in C with the same separators) or not."""

from __future__ import annotations

import json
import math

import pytest

from tandem.tune.logger import _params_json

CONFIGS = [
    {},
    {"trial_s": 0.1},
    {"lr": 1e-3, "layers": 3, "act": "relu", "use_bn": True, "dropout": None, "off": False},
    {"b": 1, "a": 2, "B": 3, "_": 4, "ä": "ü", "emoji": "\N{SNOWMAN}", "big": 10**30},
    {"quote": 'say "hi"', "newline": "a\nb", "sep": ",\n  x", "tab": "\t", "neg": -0.0},
    {"nan": math.nan, "inf": math.inf, "ninf": -math.inf},
    {"nested": {"z": 1, "a": [1, 2, {"k": "v"}]}, "top": 1},
    {"tuple": (1, 2), "list": [3.5, "x"]},
]


@pytest.mark.parametrize("config", CONFIGS)
def test_params_json_is_jsons_indented_sorted_text(config):
    assert _params_json(config) == json.dumps(config, indent=2, sort_keys=True)
