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
from typing import TypeVar

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


T = TypeVar("T", str, int, bool)


def required(obj: JsonObject, key: str, kind: type[T]) -> T:
    """The value at ``key``, of ``kind`` (a bool is no int); ValueError naming the key
    when it is missing or of another type."""
    value = optional(obj, key, kind)
    if value is None:
        raise ValueError(f"{key!r}: missing")
    return value


def optional(obj: JsonObject, key: str, kind: type[T]) -> T | None:
    """The value at ``key``, of ``kind``, or None when it is missing or null; ValueError
    when it is of another type."""
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, kind) and (kind is bool or not isinstance(value, bool)):
        return value
    raise ValueError(f"{key!r}: {value!r} is not a {kind.__name__}")


def required_number(obj: JsonObject, key: str) -> float:
    """The number at ``key`` as it was written (an int stays one); ValueError naming the
    key when it is missing or not a number."""
    value = optional_number(obj, key)
    if value is None:
        raise ValueError(f"{key!r}: missing")
    return value


def optional_number(obj: JsonObject, key: str) -> float | None:
    """The number at ``key`` as it was written, or None when it is missing or null;
    ValueError when it is not a number."""
    value = obj.get(key)
    if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
        return value
    raise ValueError(f"{key!r}: {value!r} is not a number")


def int_list(obj: JsonObject, key: str) -> list[int]:
    """The list of integers at ``key`` ([] when missing); ValueError if it is not one."""
    found = _list_at(obj, key)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in found):
        raise ValueError(f"{key!r}: not a list of integers")
    return [v for v in found if isinstance(v, int)]


def text_list(obj: JsonObject, key: str) -> list[str]:
    """The list of strings at ``key`` ([] when missing); ValueError if it is not one."""
    found = _list_at(obj, key)
    if not all(isinstance(v, str) for v in found):
        raise ValueError(f"{key!r}: not a list of strings")
    return [v for v in found if isinstance(v, str)]


def _list_at(obj: JsonObject, key: str) -> list[JsonValue]:
    value = obj.get(key)
    if value is not None and not isinstance(value, list):
        raise ValueError(f"{key!r}: {value!r} is not a list")
    return value or []
