"""model/jsonvalue.py: a free-form part of a document read one checked value at a time,
and a TypedDict made a JsonObject with every value checked; model/narrow.py's strict
object+key getters on a launch plan."""

from __future__ import annotations

import pytest

from beoperf.model import jsonvalue, narrow
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
    assert narrow.integer_at(plan, "port") == 5202
    assert narrow.opt_text_at(plan, "host") is None
    assert narrow.flag_at(plan, "yes") is False
    timeout = narrow.num_at(plan, "timeout")
    assert timeout == 10 and isinstance(timeout, int)  # kept as written
    assert narrow.ints_or_empty(plan, "sizes") == [1, 2] and narrow.texts_or_empty(plan, "argv")
    for call in (lambda: narrow.integer_at(plan, "yes"),
                 lambda: narrow.text_at(plan, "port"),
                 lambda: narrow.text_at(plan, "missing"),
                 lambda: narrow.opt_num_at(plan, "argv"),
                 lambda: narrow.ints_or_empty(plan, "argv"),
                 lambda: narrow.texts_or_empty(plan, "port")):
        with pytest.raises(ValueError, match=r"^(yes|port|missing|argv)(\[\d+\])?: expected"):
            call()
