"""Checked getters for reading a typed body out of a document's JSON.

A loaded document has passed its kind's schema, but a reader must not trust a value's
type on that alone (a document built in memory skips the schema; a schema may allow more
than a field needs): each getter takes one value of a JsonObject and narrows it to the
type the dataclass field has, or raises DocumentError naming the field.  So a crafted
file meets one clear line, never a TypeError deep in a renderer.
"""

from __future__ import annotations

from beoperf.model.document import DocumentError, JsonObject, JsonValue


def _fail(key: str, want: str, value: JsonValue) -> DocumentError:
    return DocumentError(f"'{key}' is not {want} ({type(value).__name__})")


def obj(value: JsonValue, key: str = "body") -> JsonObject:
    """``value`` as an object."""
    if not isinstance(value, dict):
        raise _fail(key, "an object", value)
    return value


def opt_obj(o: JsonObject, key: str) -> JsonObject | None:
    value = o.get(key)
    return None if value is None else obj(value, key)


def array(o: JsonObject, key: str) -> list[JsonValue]:
    """A list (a missing key reads as an empty one)."""
    value = o.get(key, [])
    if not isinstance(value, list):
        raise _fail(key, "a list", value)
    return value


def objects(o: JsonObject, key: str) -> list[JsonObject]:
    """A list of objects (a missing key reads as an empty one)."""
    return [obj(v, key) for v in array(o, key)]


def text(o: JsonObject, key: str) -> str:
    value = o.get(key)
    if not isinstance(value, str):
        raise _fail(key, "a string", value)
    return value


def opt_text(o: JsonObject, key: str) -> str | None:
    return None if o.get(key) is None else text(o, key)


def texts(o: JsonObject, key: str) -> list[str]:
    """A list of strings (a missing key reads as an empty one)."""
    out = array(o, key)
    if not all(isinstance(v, str) for v in out):
        raise _fail(key, "a list of strings", out)
    return [str(v) for v in out]


def flag(o: JsonObject, key: str, default: bool | None = None) -> bool:
    value = o.get(key, default)
    if not isinstance(value, bool):
        raise _fail(key, "true or false", value)
    return value


def _whole(value: JsonValue) -> int | None:
    """An integer, or a float without a fractional part (JSON Schema's "integer" admits
    5.0: a file the schema passes reads), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def integer(o: JsonObject, key: str) -> int:
    value = o.get(key)
    found = _whole(value)
    if found is None:
        raise _fail(key, "an integer", value)
    return found


def opt_integer(o: JsonObject, key: str) -> int | None:
    return None if o.get(key) is None else integer(o, key)


def number(o: JsonObject, key: str) -> float:
    """A number, as stored (an int stays an int, so that a body written back is the same
    JSON)."""
    value = o.get(key)
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise _fail(key, "a number", value)
    return value


def opt_number(o: JsonObject, key: str) -> float | None:
    return None if o.get(key) is None else number(o, key)


def floats(o: JsonObject, key: str) -> list[float]:
    """A list of numbers (a missing key reads as an empty one)."""
    out = array(o, key)
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in out):
        raise _fail(key, "a list of numbers", out)
    return [v for v in out if isinstance(v, int | float)]


def opt_floats(o: JsonObject, key: str) -> list[float | None]:
    """A list of numbers and nulls (a missing key reads as an empty one)."""
    out = array(o, key)
    if not all(v is None or isinstance(v, int | float) and not isinstance(v, bool)
               for v in out):
        raise _fail(key, "a list of numbers or nulls", out)
    return [v if isinstance(v, int | float) else None for v in out]


def integers(o: JsonObject, key: str) -> list[int]:
    """A list of integers (a missing key reads as an empty one)."""
    return whole_numbers(o.get(key, []), key)


def whole_numbers(value: JsonValue, key: str) -> list[int]:
    """``value`` (named ``key`` in errors) as a list of integers."""
    found = [_whole(v) for v in value] if isinstance(value, list) else [None]
    known = [v for v in found if v is not None]
    if len(known) < len(found):
        raise _fail(key, "a list of integers", value)
    return known


def numbers(o: JsonObject, key: str) -> dict[str, float | None]:
    """An object of numbers or nulls, by name."""
    found = opt_obj(o, key) or {}
    return {k: opt_number(found, k) for k in found}


def counts(o: JsonObject, key: str) -> dict[str, int]:
    """An object of integers, by name."""
    found = opt_obj(o, key) or {}
    return {k: integer(found, k) for k in found}
