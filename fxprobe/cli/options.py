"""Option types shared by several commands.

Numeric options are checked by the validation layer's types (fxprobe.core.schema): finite (``nan`` and ``inf``
are refused, which click's own FLOAT and FloatRange accept), in range, whole where a count is meant. A bad
value is click's one usage error naming the option (exit 2). The unit-bearing duration and rate types belong
beside these.
"""

from __future__ import annotations

from typing import Annotated, Any

import click
from pydantic import Field

from fxprobe.core.schema import (Fraction, NonNegativeFloat, NonNegativeInt, Percent, PositiveFloat, PositiveInt,
                                 check_value)


class SchemaNumber(click.ParamType):
    """A number on the command line, converted from text and checked against a schema type."""

    def __init__(self, annotation: Any, name: str):
        self.annotation = annotation
        self.name = name

    def convert(self, value, param, ctx):
        try:
            return check_value(self.annotation, value, strict=False)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def number(kind: type = float, *, name: str | None = None, **bounds: float) -> SchemaNumber:
    """An option type for ``kind`` (int or float) within ``bounds`` (gt, ge, lt, le), e.g. number(ge=0.5)."""
    annotation = Annotated[kind, Field(allow_inf_nan=False, **bounds)] if kind is float else \
        Annotated[kind, Field(**bounds)]
    text = " ".join(f"{ {'gt': '>', 'ge': '>=', 'lt': '<', 'le': '<='}[k]}{v:g}" for k, v in bounds.items())
    return SchemaNumber(annotation, name or f"{'integer' if kind is int else 'number'} {text}".strip())


POSITIVE_FLOAT = SchemaNumber(PositiveFloat, "number > 0")
NON_NEGATIVE_FLOAT = SchemaNumber(NonNegativeFloat, "number >= 0")
PERCENT = SchemaNumber(Percent, "percent 0-100")
FRACTION = SchemaNumber(Fraction, "fraction 0-1")
POSITIVE_INT = SchemaNumber(PositiveInt, "integer >= 1")
NON_NEGATIVE_INT = SchemaNumber(NonNegativeInt, "integer >= 0")
PORT = number(int, ge=1, le=65535, name="port 1-65535")
SCALE = number(float, gt=0, le=1, name="factor 0 < s <= 1")


class IntList(click.ParamType):
    """A comma-separated list of positive integers, with K/M/G suffixes (binary) for sizes."""

    name = "list"
    _SUFFIX = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

    def convert(self, value, param, ctx):
        if isinstance(value, list):
            return value
        out = []
        for part in str(value).split(","):
            part = part.strip().lower()
            scale = self._SUFFIX.get(part[-1:], 1)
            digits = part[:-1] if scale != 1 else part
            if not digits.isdigit() or int(digits) == 0:
                self.fail(f"{value!r}: expected positive integers separated by commas (K/M/G allowed)", param, ctx)
            out.append(int(digits) * scale)
        return out


INT_LIST = IntList()
lab_option = click.option("--lab", "lab", default=None, metavar="NAME",
                          help="Node names are guests of this running lab (e.g. array, host1); 'default' for the default lab.")
