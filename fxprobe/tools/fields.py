"""Checked access to fields of tool output: every failure is a ParseError naming source and field.

Tools print numbers as numbers or as strings (nvme-cli 2.3 128-bit counters,
old json-c), JSON after warning lines (fio), and change shapes between
versions. These helpers turn all of that into plain Python values or raise
``ParseError(source, field, problem)``; they never raise anything else.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from fxprobe.core.errors import ParseError

MISSING: Any = object()

_JSON_START = re.compile(r"^[ \t]*[\[{]", re.MULTILINE)


def load_json(text: str, source: str, *, field: str = "json") -> Any:
    """Decode the JSON value that starts the first line beginning with '{' or '['.

    Lines before it (tool warnings such as fio's ``fio: pid=...``) are skipped; text
    after the value (a second report) is ignored. A truncated or broken value is a
    ParseError with the decoder's position, never a guess from an inner object.
    """
    if not isinstance(text, str):
        raise ParseError(source, field, f"expected text, got {type(text).__name__}")
    match = _JSON_START.search(text)
    if match is None:
        raise ParseError(source, field, "no JSON object or array found in the output")
    try:
        value, _ = json.JSONDecoder().raw_decode(text, match.end() - 1)
    except RecursionError:
        raise ParseError(source, field, "invalid JSON: nested too deeply") from None
    except ValueError as exc:
        raise ParseError(source, field, f"invalid JSON: {str(exc)[:120]}") from None
    return value


def obj(value: Any, source: str, field: str) -> dict:
    if not isinstance(value, dict):
        raise ParseError(source, field, f"expected an object, got {_kind(value)}")
    return value


def arr(value: Any, source: str, field: str) -> list:
    if not isinstance(value, list):
        raise ParseError(source, field, f"expected an array, got {_kind(value)}")
    return value


def get(mapping: dict, key: str, source: str, field: str, default: Any = MISSING) -> Any:
    """mapping[key], or default, or a ParseError naming the missing field."""
    if key in mapping:
        return mapping[key]
    if default is MISSING:
        raise ParseError(source, field, "missing")
    return default


def number(value: Any, source: str, field: str) -> float:
    """A finite float from a JSON number or a numeric string ("1,234" and "12%" accepted)."""
    if isinstance(value, bool):
        raise ParseError(source, field, f"expected a number, got {_kind(value)}")
    if isinstance(value, (int, float)):
        result = float(value) if not isinstance(value, int) or abs(value) < 2**1023 else math.inf
    elif isinstance(value, str):
        cleaned = value.strip().replace(",", "").rstrip("%").strip()
        try:
            result = float(cleaned)
        except ValueError:
            raise ParseError(source, field, f"not a number: {value[:40]!r}") from None
    else:
        raise ParseError(source, field, f"expected a number, got {_kind(value)}")
    if not math.isfinite(result):
        raise ParseError(source, field, f"not a finite number: {str(value)[:40]!r}")
    return result


def integer(value: Any, source: str, field: str) -> int:
    """An int from a JSON integer, an integral float, or a decimal/hex string (128-bit counters)."""
    if isinstance(value, bool):
        raise ParseError(source, field, f"expected an integer, got {_kind(value)}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        cleaned = value.strip().replace(",", "")
        try:
            return int(cleaned, 16) if cleaned.lower().startswith("0x") else int(cleaned)
        except ValueError:
            pass
    as_float = number(value, source, field)
    if as_float != int(as_float):
        raise ParseError(source, field, f"expected an integer, got {str(value)[:40]!r}")
    return int(as_float)


def text(value: Any, source: str, field: str) -> str:
    """A string with the padding tools add (serials, models) stripped; numbers are accepted as text."""
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise ParseError(source, field, f"expected text, got {_kind(value)}")


def opt(mapping: dict, key: str, convert, source: str, field: str, default: Any = None) -> Any:
    """convert(mapping[key]) when present and not null, else default."""
    value = mapping.get(key)
    if value is None:
        return default
    return convert(value, source, field)


class Fields:
    """One JSON object of a tool's output, its fields read with their place named (``where.key``): the source
    and the place are said once here, not again at every field."""

    __slots__ = ("data", "source", "where")

    def __init__(self, raw: Any, source: str, where: str = ""):
        self.data = obj(raw, source, where or "(top level)")
        self.source, self.where = source, where

    def at(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def need(self, key: str, convert=text) -> Any:
        """convert(data[key]); a missing key is a ParseError naming it."""
        return convert(get(self.data, key, self.source, self.at(key)), self.source, self.at(key))

    def opt(self, key: str, convert, default: Any = None) -> Any:
        return opt(self.data, key, convert, self.source, self.at(key), default)

    def text(self, key: str, default: str = "") -> str:
        return self.opt(key, text, default)

    def int(self, key: str, default: Any = None) -> Any:
        return self.opt(key, integer, default)

    def number(self, key: str, default: Any = 0.0) -> Any:
        return self.opt(key, number, default)

    def each(self, key: str, parse, *, required: bool = False) -> tuple:
        """parse(item, source, where) for every item of the array under ``key`` (absent: none, or an error
        when ``required``)."""
        items = arr(get(self.data, key, self.source, self.at(key), MISSING if required else []),
                    self.source, self.at(key))
        return tuple(parse(item, self.source, f"{self.at(key)}[{i}]") for i, item in enumerate(items))

    def sub(self, key: str, *, required: bool = False) -> "Fields":
        """The object under ``key`` (absent: an empty one, or an error when ``required``)."""
        return Fields(get(self.data, key, self.source, self.at(key), MISSING if required else {}), self.source,
                      self.at(key))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {dict: "an object", list: "an array", str: "text", bool: "a boolean"}.get(
        type(value), type(value).__name__)
