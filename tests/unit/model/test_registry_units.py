"""ModelRef parsing, ServeSettings validation and the front's shape check (no processes)."""

from __future__ import annotations

import pytest

from tandem._core.errors import ConfigError
from tandem.model import ModelRef, ServeSettings
from tandem.model.serve._front import HTTPError, _check_shapes


def test_model_ref_reads_every_spelling():
    assert ModelRef.parse("digits") == ModelRef("digits")
    assert ModelRef.parse("digits@3") == ModelRef("digits", 3)
    assert ModelRef.parse("digits@prod") == ModelRef("digits", alias="prod")
    assert ModelRef.parse("digits@latest") == ModelRef("digits")
    assert str(ModelRef("digits", 3)) == "digits@3" and str(ModelRef("d", alias="p")) == "d@p"
    assert ModelRef.parse(ModelRef("x", 1)) == ModelRef("x", 1)


@pytest.mark.parametrize("bad, msg", [
    ("digits@", "ends with '@'"),
    ("", "model name '' is not allowed"),
    ("a b", "is not allowed"),
    ("digits@0", "whole numbers from 1"),
    (3, "a model reference is a string"),
])
def test_model_ref_refuses_bad_spellings(bad, msg):
    with pytest.raises(ConfigError, match=msg):
        ModelRef.parse(bad)


def test_model_ref_refuses_version_and_alias_together():
    with pytest.raises(ConfigError, match="not both"):
        ModelRef("d", 1, alias="prod")


@pytest.mark.parametrize("settings, msg", [
    ({"num_replicas": 0}, "num_replicas=0"),
    ({"max_batch_size": 1.5}, "max_batch_size=1.5"),
    ({"port": 70000}, "port=70000"),
    ({"batch_wait_ms": -1}, "batch_wait_ms=-1"),
    ({"route_prefix": "digits"}, "starting with '/'"),
    ({"replicas": 2}, r"unknown keys \['replicas'\]"),
    ({"resources_per_replica": {"cpu": 1}}, "did you mean 'CPU'"),
])
def test_serve_settings_refuse_bad_values(settings, msg):
    with pytest.raises(ConfigError, match=msg):
        ServeSettings.of(settings).bundle()


def test_serve_settings_defaults():
    s = ServeSettings.of(None)
    assert s.bundle() == {"CPU": 1.0}
    assert s.prefix_for("digits") == "/digits"
    assert ServeSettings(route_prefix="/").prefix_for("x") == ""


def test_front_shape_check_names_the_input_and_the_expected_shape():
    _check_shapes([[0.0] * 4, [1.0] * 4], [4])
    with pytest.raises(HTTPError) as e:
        _check_shapes([[0.0] * 4, [1.0] * 3], [4])
    assert e.value.status == 422
    assert e.value.detail == ("inputs[1] has shape [3]; the model expects each input to have "
                              "shape [4] (from its example_input).")
    with pytest.raises(HTTPError, match="not an array"):
        _check_shapes(["text"], [4])
