"""model/jsonvalue.py: a free-form part of a document read one checked value at a time,
and a TypedDict made a JsonObject with every value checked."""

from __future__ import annotations

import pytest

from beoperf.model import jsonvalue
from beoperf.pools import pool_facts


def test_a_typed_dict_becomes_a_json_object_and_nothing_else_does():
    facts = pool_facts(1 << 20, True, 32 << 20)
    assert jsonvalue.as_object(facts) == dict(facts)
    assert list(jsonvalue.as_object(facts)) == list(facts)  # the key order is kept
    assert jsonvalue.as_object({"pair": (1, "a"), "deep": {"x": [None, True, 1.5]}}) == {
        "pair": [1, "a"], "deep": {"x": [None, True, 1.5]}}
    for bad in ({"x": {1, 2}}, {"x": b"bytes"}, {"x": [object()]}, {1: "key"}):
        with pytest.raises(TypeError, match="not JSON"):
            jsonvalue.as_object(bad)


def test_a_value_of_another_type_reads_as_not_known():
    """A crafted or older facts object meets None (or {}), never a traceback."""
    facts = {"interface": {"mtu": 1500, "name": "eth0"}, "socket": "not an object",
             "flag": True, "count": 3, "rate": 2.5, "list": ["a", 1, "b"]}
    assert jsonvalue.section(facts, "interface") == {"mtu": 1500, "name": "eth0"}
    assert jsonvalue.section(facts, "socket") == {} == jsonvalue.section(None, "x")
    assert jsonvalue.integer(jsonvalue.section(facts, "interface"), "mtu") == 1500
    assert jsonvalue.integer(facts, "flag") is None and jsonvalue.number(facts, "flag") is None
    assert jsonvalue.number(facts, "rate") == 2.5 and jsonvalue.number(facts, "count") == 3
    assert isinstance(jsonvalue.number(facts, "count"), int)  # as written: printed "3", not "3.0"
    assert jsonvalue.text(facts, "count") is None and jsonvalue.texts(facts, "list") == ["a", "b"]
    assert jsonvalue.items(facts, "socket") == [] and jsonvalue.flag(facts, "flag")


def test_a_plan_value_of_another_type_is_an_error_naming_its_key():
    plan = {"port": 5202, "host": None, "timeout": 10, "sizes": [1, 2], "argv": ["a"],
            "yes": False}
    assert jsonvalue.required(plan, "port", int) == 5202
    assert jsonvalue.optional(plan, "host", str) is None
    assert jsonvalue.required(plan, "yes", bool) is False
    timeout = jsonvalue.required_number(plan, "timeout")
    assert timeout == 10 and isinstance(timeout, int)  # kept as written
    assert jsonvalue.int_list(plan, "sizes") == [1, 2] and jsonvalue.text_list(plan, "argv")
    for call in (lambda: jsonvalue.required(plan, "yes", int),
                 lambda: jsonvalue.required(plan, "port", str),
                 lambda: jsonvalue.required(plan, "missing", str),
                 lambda: jsonvalue.optional_number(plan, "argv"),
                 lambda: jsonvalue.int_list(plan, "argv"),
                 lambda: jsonvalue.text_list(plan, "port")):
        with pytest.raises(ValueError, match="'"):
            call()
