"""Reading a JsonObject one value at a time, and making one of a typed dict.

A document's free-form parts (a ping-pong run's parameters and both ends' facts, what an
import brought) are JsonObjects: mypy knows only that each value is some JSON.  A reader
takes a value through these getters, which narrow it to what the reader needs and give
None (or an empty object) for a value that is missing or of another type, so that a
crafted or older file shows as "not known" rather than a traceback.  The other way,
:func:`as_object` turns a TypedDict (a protocol frame, a facts dict this process built)
into a JsonObject, checking every value, so that nothing but JSON reaches a document.

This layer is pure data: it imports nothing of beoperf but model.document.
"""

from __future__ import annotations

from collections.abc import Mapping

from beoperf.model.document import JsonObject, JsonValue


def as_json(value: object) -> JsonValue:
    """``value`` as a JsonValue (tuples become lists); TypeError for anything else."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return [as_json(v) for v in value]
    if isinstance(value, Mapping):
        return as_object(value)
    raise TypeError(f"not JSON: a {type(value).__name__}")


def as_object(value: Mapping[str, object]) -> JsonObject:
    """A mapping with string keys (e.g. a TypedDict) as a JsonObject, every value
    checked (as_json); TypeError for a key or value that is not JSON."""
    out: JsonObject = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(f"not JSON: a {type(key).__name__} key")
        out[key] = as_json(item)
    return out


def section(obj: JsonObject | None, key: str) -> JsonObject:
    """The object at ``key`` ({} when it is missing or not an object)."""
    value = obj.get(key) if obj else None
    return value if isinstance(value, dict) else {}


def number(obj: JsonObject | None, key: str) -> float | None:
    """The number at ``key`` as it was written, an int staying one (None when it is
    missing or not a number; a bool is not one)."""
    value = obj.get(key) if obj else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value
    return None


def integer(obj: JsonObject | None, key: str) -> int | None:
    """The integer at ``key`` (None when it is missing or not an integer)."""
    value = obj.get(key) if obj else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def text(obj: JsonObject | None, key: str) -> str | None:
    """The string at ``key`` (None when it is missing or not a string)."""
    value = obj.get(key) if obj else None
    return value if isinstance(value, str) else None


def flag(obj: JsonObject | None, key: str) -> bool:
    """Whether ``key`` holds a true value (JSON truthiness, as ``bool(obj.get(key))``)."""
    return bool(obj.get(key)) if obj else False


def boolean(obj: JsonObject | None, key: str) -> bool | None:
    """The true or false at ``key`` (None when it is missing or not a bool)."""
    value = obj.get(key) if obj else None
    return value if isinstance(value, bool) else None


def sections(obj: JsonObject | None, key: str) -> list[JsonObject]:
    """The objects of the list at ``key`` ([] when it is missing or not a list; an item
    that is not an object is left out)."""
    return [v for v in items(obj, key) if isinstance(v, dict)]


def text_map(obj: JsonObject | None, key: str) -> dict[str, str]:
    """The string values of the object at ``key`` (others left out; {} when it is
    missing or not an object)."""
    return {k: v for k, v in section(obj, key).items() if isinstance(v, str)}


def number_map(obj: JsonObject | None, key: str) -> dict[str, float]:
    """The number values of the object at ``key``, as written (others left out; {} when
    it is missing or not an object)."""
    return {k: v for k, v in section(obj, key).items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def texts(obj: JsonObject | None, key: str) -> list[str]:
    """The strings of the list at ``key`` ([] when it is missing or not a list)."""
    value = obj.get(key) if obj else None
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def items(obj: JsonObject | None, key: str) -> list[JsonValue]:
    """The list at ``key`` ([] when it is missing or not a list)."""
    value = obj.get(key) if obj else None
    return value if isinstance(value, list) else []
