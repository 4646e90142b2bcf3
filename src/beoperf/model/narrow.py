"""Checked getters: a typed body's from_dict reads each value of a JsonObject through one
of these, so a value of the wrong type meets a DocumentError naming the key, not a
traceback deep in a renderer.

A document has passed its schema before a typed body reads it; these checks are what
mypy sees of that (a JsonValue narrowed to the type the field holds) and what stops a
crafted object handed to from_dict directly.  Numbers are returned as stored (an int
stays an int where a float is allowed), so body() gives the stored JSON back.

This layer is pure data: it imports nothing of beoperf but the document module.
"""

from __future__ import annotations

from beoperf.model.document import DocumentError, JsonObject, JsonValue


def _bad(key: str, wanted: str, value: JsonValue) -> DocumentError:
    found = "null" if value is None else type(value).__name__
    return DocumentError(f"{key}: expected {wanted}, found {found}")


def obj(value: JsonValue, key: str) -> JsonObject:
    if not isinstance(value, dict):
        raise _bad(key, "an object", value)
    return value


def opt_obj(value: JsonValue, key: str) -> JsonObject | None:
    return None if value is None else obj(value, key)


def objects(value: JsonValue, key: str) -> list[JsonObject]:
    """A list of objects."""
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [obj(item, f"{key}[{i}]") for i, item in enumerate(value)]


def values(value: JsonValue, key: str) -> list[JsonValue]:
    """A list, its items still to be narrowed."""
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return value


def text(value: JsonValue, key: str) -> str:
    if not isinstance(value, str):
        raise _bad(key, "a string", value)
    return value


def opt_text(value: JsonValue, key: str) -> str | None:
    return None if value is None else text(value, key)


def integer(value: JsonValue, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(key, "an integer", value)
    return value


def opt_int(value: JsonValue, key: str) -> int | None:
    return None if value is None else integer(value, key)


def num(value: JsonValue, key: str) -> float:
    """A number as stored (an int stays an int)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(key, "a number", value)
    return value


def opt_num(value: JsonValue, key: str) -> float | None:
    return None if value is None else num(value, key)


def flag(value: JsonValue, key: str) -> bool:
    if not isinstance(value, bool):
        raise _bad(key, "true or false", value)
    return value


def texts(value: JsonValue, key: str) -> list[str]:
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [text(item, f"{key}[{i}]") for i, item in enumerate(value)]


def opt_texts(value: JsonValue, key: str) -> list[str] | None:
    return None if value is None else texts(value, key)


def ints(value: JsonValue, key: str) -> list[int]:
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [integer(item, f"{key}[{i}]") for i, item in enumerate(value)]


def opt_ints(value: JsonValue, key: str) -> list[int] | None:
    return None if value is None else ints(value, key)


def nums(value: JsonValue, key: str) -> list[float]:
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [num(item, f"{key}[{i}]") for i, item in enumerate(value)]


def opt_nums(value: JsonValue, key: str) -> list[float | None]:
    """A list of numbers or nulls."""
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [opt_num(item, f"{key}[{i}]") for i, item in enumerate(value)]


def flags(value: JsonValue, key: str) -> list[bool]:
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [flag(item, f"{key}[{i}]") for i, item in enumerate(value)]


def text_map(value: JsonValue, key: str) -> dict[str, str]:
    return {k: text(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def num_map(value: JsonValue, key: str) -> dict[str, float]:
    return {k: num(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def opt_num_map(value: JsonValue, key: str) -> dict[str, float | None]:
    """An object of numbers or nulls."""
    return {k: opt_num(v, f"{key}.{k}") for k, v in obj(value, key).items()}
