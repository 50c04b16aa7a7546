"""Quantities with units as people type them: durations (``30s``, ``5m``, ``72h``, ``1h30m``, ``250ms``) and
bit rates (``100G``, ``25Gb/s``, ``20M``, ``200mbit``; ``8GB/s`` is bytes).

Pure functions over text; exact decimal arithmetic, so ``0.02G`` is exactly 20 Mb/s. A bare number is in the
unit the caller names (the option's documented bare unit). Prefixes of rates are decimal (SI), as link speeds
are: k = 10^3, M = 10^6, G = 10^9, T = 10^12, case-insensitive for bits; ``B`` (upper case) means bytes.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

SECONDS = {"us": Decimal("0.000001"), "µs": Decimal("0.000001"), "ms": Decimal("0.001"), "s": Decimal(1),
           "sec": Decimal(1), "m": Decimal(60), "min": Decimal(60), "h": Decimal(3600), "d": Decimal(86400)}
BITS_PER_S = {"b/s": Decimal(1), "kb/s": Decimal(10) ** 3, "mb/s": Decimal(10) ** 6, "gb/s": Decimal(10) ** 9,
              "tb/s": Decimal(10) ** 12}
_PREFIX = {"": Decimal(1), "k": Decimal(10) ** 3, "m": Decimal(10) ** 6, "g": Decimal(10) ** 9,
           "t": Decimal(10) ** 12}
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)"
_DURATION_PART = re.compile(r"((?:\d+(?:\.\d*)?|\.\d+))(us|µs|ms|sec|min|s|m|h|d)", re.IGNORECASE)
_RATE = re.compile(rf"({_NUMBER})([kmgt]?)(b/s|bit/s|bits/s|bps|bit|bits|b|B/s|Bps|B)?", re.IGNORECASE)

DURATION_EXAMPLES = "30s, 5m, 72h, 1h30m, 250ms"
RATE_EXAMPLES = "100G, 25Gb/s, 20M, 200mbit"


class UnitError(ValueError):
    """The text is not a quantity of this kind; the message says what was expected."""


def _decimal(text: str) -> Decimal:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise UnitError(f"{text!r} is not a number") from None
    if not value.is_finite():
        raise UnitError(f"{text!r} is not a finite number")
    return value


def parse_duration(text: str, bare: str = "s") -> Decimal:
    """Seconds in ``text`` (``90``, ``90s``, ``10m``, ``1h30m``, ``250ms``, ``2d``); a bare number is in ``bare``."""
    raw = str(text).strip()
    if re.fullmatch(_NUMBER, raw):
        return _decimal(raw) * SECONDS[bare]
    sign = -1 if raw.startswith("-") and len(_DURATION_PART.findall(raw)) == 1 else 1
    body = raw[1:] if sign == -1 else raw
    parts = _DURATION_PART.findall(body)
    if not parts or _DURATION_PART.sub("", body) != "":
        raise UnitError(f"expected a duration such as {DURATION_EXAMPLES} (a bare number is {unit_word(bare)})")
    return sign * sum((_decimal(n) * SECONDS[u.lower()] for n, u in parts), Decimal(0))


def parse_rate(text: str, bare: str = "Gb/s") -> Decimal:
    """Bits per second in ``text`` (``100G``, ``25Gb/s``, ``20M``, ``200mbit``, ``8GB/s``); a bare number is in
    ``bare`` (one of BITS_PER_S, e.g. ``Gb/s``)."""
    raw = str(text).strip()
    if re.fullmatch(_NUMBER, raw):
        return _decimal(raw) * BITS_PER_S[bare.lower()]
    match = _RATE.fullmatch(raw)
    if not match:
        raise UnitError(f"expected a rate such as {RATE_EXAMPLES} (a bare number is {bare}; B/s is bytes)")
    number, prefix, unit = match.groups()
    scale = _PREFIX[prefix.lower()] * (8 if unit and unit[0] == "B" else 1)
    return _decimal(number) * scale


def in_unit(value: Decimal, unit: str) -> Decimal:
    """A parsed quantity (seconds or bits/s) expressed in ``unit`` (``ms``, ``s``, ``Mb/s``, ``GB/s``...)."""
    if unit in SECONDS:
        return value / SECONDS[unit]
    return value / (BITS_PER_S[unit.lower()] * (8 if "B" in unit else 1))   # GB/s, MB/s: bytes


def is_bare(text: str) -> bool:
    """A number without a unit (its unit is the option's documented bare unit)."""
    return re.fullmatch(_NUMBER, str(text).strip()) is not None


def is_number(text: str) -> bool:
    """Text Python reads as a number, nan and inf included (which no quantity accepts)."""
    try:
        float(str(text))
    except ValueError:
        return False
    return True


def unit_word(unit: str) -> str:
    return {"s": "seconds", "ms": "milliseconds", "us": "microseconds", "m": "minutes", "h": "hours",
            "d": "days"}.get(unit, unit)
