"""Checked getters: the one home for strict reading of JSON (a document's typed body, a
rank's launch plan, a host's result).

A loaded document has passed its kind's schema, but a reader must not trust a value's
type on that alone (a document built in memory skips the schema; a schema may leave a
part free): a typed body's from_dict reads each value it takes through one of these, so
a value of the wrong type meets a DocumentError (a ValueError) naming the key, never a
TypeError deep in a renderer.  Numbers are returned as stored (an int stays an int where
a float is allowed), so body() gives the stored JSON back; an integer admits a float
without a fractional part (5.0), as JSON Schema's "integer" does.

Two forms: the value form (``text(value, key)``: ``key`` only names the value in the
error) and the object+key form (``text_at(o, key)``: the value at ``o[key]``, a missing
key read as null).  What a missing or null value reads as is in the name: ``opt_*``
reads it as None; ``*_or_empty(o, key)`` reads a missing key as an empty list (the maps:
a missing key or null as an empty object); ``*_or_none(value, key)`` reads null as an
empty list; everything else refuses it.  One message for every refusal: ``KEY: expected
X, found Y``, an item of a list named ``KEY[i]``.

Lenient reading (a free-form fact missing or of another type reads as None) is
beoperf.model.jsonvalue's.  This layer is pure data: it imports nothing of beoperf but
the document module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from beoperf.model.document import DocumentError, JsonObject, JsonValue

T = TypeVar("T")


class _Bad(DocumentError):
    """The one message: the key (for an item of a list, ``list[i]``), what it should
    hold and what it holds."""

    def __init__(self, key: str, want: str, found: str):
        super().__init__(f"{key}: expected {want}, found {found}")
        self.key, self.want, self.found = key, want, found


def _bad(key: str, want: str, value: JsonValue) -> DocumentError:
    return _Bad(key, want, "null" if value is None else type(value).__name__)


def _items(value: JsonValue, key: str, each: Callable[[JsonValue, str], T]) -> list[T]:
    """``value`` as a list, each item read by ``each`` (an item's error names it
    ``key[i]``)."""
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return [each(item, f"{key}[{i}]") for i, item in enumerate(value)]


# --------------------------------------------------------------------------- value form


def obj(value: JsonValue, key: str = "body") -> JsonObject:
    if not isinstance(value, dict):
        raise _bad(key, "an object", value)
    return value


def opt_obj(value: JsonValue, key: str) -> JsonObject | None:
    return None if value is None else obj(value, key)


def values(value: JsonValue, key: str) -> list[JsonValue]:
    """A list, its items still to be narrowed."""
    if not isinstance(value, list):
        raise _bad(key, "a list", value)
    return value


def objects(value: JsonValue, key: str) -> list[JsonObject]:
    """A list of objects."""
    return _items(value, key, obj)


def text(value: JsonValue, key: str) -> str:
    if not isinstance(value, str):
        raise _bad(key, "a string", value)
    return value


def opt_text(value: JsonValue, key: str) -> str | None:
    return None if value is None else text(value, key)


def text_or_num(value: JsonValue, key: str) -> str | float:
    """A string, or a number as stored."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _bad(key, "a number or a string", value)
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


def integer(value: JsonValue, key: str) -> int:
    found = _whole(value)
    if found is None:
        raise _bad(key, "an integer", value)
    return found


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


def opt_flag(value: JsonValue, key: str) -> bool | None:
    return None if value is None else flag(value, key)


def texts(value: JsonValue, key: str) -> list[str]:
    return _items(value, key, text)


def opt_texts(value: JsonValue, key: str) -> list[str] | None:
    return None if value is None else texts(value, key)


def ints(value: JsonValue, key: str) -> list[int]:
    return _items(value, key, integer)


def opt_ints(value: JsonValue, key: str) -> list[int] | None:
    return None if value is None else ints(value, key)


def nums(value: JsonValue, key: str) -> list[float]:
    return _items(value, key, num)


def opt_nums(value: JsonValue, key: str) -> list[float | None]:
    """A list of numbers or nulls."""
    return _items(value, key, opt_num)


def flags(value: JsonValue, key: str) -> list[bool]:
    return _items(value, key, flag)


def text_map(value: JsonValue, key: str) -> dict[str, str]:
    return {k: text(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def opt_text_map(value: JsonValue, key: str) -> dict[str, str | None]:
    """An object of strings or nulls."""
    return {k: opt_text(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def num_map(value: JsonValue, key: str) -> dict[str, float]:
    return {k: num(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def opt_num_map(value: JsonValue, key: str) -> dict[str, float | None]:
    """An object of numbers or nulls."""
    return {k: opt_num(v, f"{key}.{k}") for k, v in obj(value, key).items()}


def int_map(value: JsonValue, key: str) -> dict[str, int]:
    return {k: integer(v, f"{key}.{k}") for k, v in obj(value, key).items()}


# --------------------------------------------------------------------- object+key form


def text_at(o: JsonObject, key: str) -> str:
    return text(o.get(key), key)


def opt_text_at(o: JsonObject, key: str) -> str | None:
    return opt_text(o.get(key), key)


def integer_at(o: JsonObject, key: str) -> int:
    return integer(o.get(key), key)


def opt_int_at(o: JsonObject, key: str) -> int | None:
    return opt_int(o.get(key), key)


def num_at(o: JsonObject, key: str) -> float:
    return num(o.get(key), key)


def opt_num_at(o: JsonObject, key: str) -> float | None:
    return opt_num(o.get(key), key)


def flag_at(o: JsonObject, key: str, default: bool | None = None) -> bool:
    """The flag at ``key``; ``default`` (when given) stands for a missing key."""
    return flag(o.get(key, default), key)


def opt_obj_at(o: JsonObject, key: str) -> JsonObject | None:
    return opt_obj(o.get(key), key)


def values_or_empty(o: JsonObject, key: str) -> list[JsonValue]:
    """The list at ``key``; a missing key reads as an empty one."""
    return values(o.get(key, []), key)


def objects_or_empty(o: JsonObject, key: str) -> list[JsonObject]:
    """The list of objects at ``key``; a missing key reads as an empty one."""
    return objects(o.get(key, []), key)


def texts_or_empty(o: JsonObject, key: str) -> list[str]:
    """The list of strings at ``key``; a missing key reads as an empty one."""
    return texts(o.get(key, []), key)


def ints_or_empty(o: JsonObject, key: str) -> list[int]:
    """The list of integers at ``key``; a missing key reads as an empty one."""
    return ints(o.get(key, []), key)


def nums_or_empty(o: JsonObject, key: str) -> list[float]:
    """The list of numbers at ``key``; a missing key reads as an empty one."""
    return nums(o.get(key, []), key)


def opt_nums_or_empty(o: JsonObject, key: str) -> list[float | None]:
    """The list of numbers or nulls at ``key``; a missing key reads as an empty one."""
    return opt_nums(o.get(key, []), key)


def int_map_or_empty(o: JsonObject, key: str) -> dict[str, int]:
    """The object of integers at ``key``; missing or null reads as empty."""
    found = o.get(key)
    return {} if found is None else int_map(found, key)


# ------------------------------------------------------------ null reads as empty (value)


def objects_or_none(value: JsonValue, key: str) -> list[JsonObject]:
    """A list of objects; null reads as an empty one."""
    return [] if value is None else objects(value, key)


def ints_or_none(value: JsonValue, key: str) -> list[int]:
    """A list of integers; null reads as an empty one."""
    return [] if value is None else ints(value, key)


def texts_or_none(value: JsonValue, key: str) -> list[str]:
    """A list of strings; null reads as an empty one."""
    return [] if value is None else texts(value, key)
