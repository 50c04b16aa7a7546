"""Option types shared by several commands.

Numeric options are checked by the validation layer's types (fxprobe.core.schema): finite (``nan`` and ``inf``
are refused, which click's own FLOAT and FloatRange accept), in range, whole where a count is meant. A bad
value is click's one usage error naming the option (exit 2). The unit-bearing duration and rate types belong
beside these (Quantity: duration(), rate()).
"""

from __future__ import annotations

import math
from typing import Annotated, Any

import click
from pydantic import Field

from fxprobe.core import units
from fxprobe.core.schema import (NonNegativeFloat, NonNegativeInt, Percent, PositiveFloat, PositiveInt,
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


class Quantity(SchemaNumber):
    """A duration or a rate with units (``30s``, ``5m``, ``72h``; ``100G``, ``25Gb/s``, ``20M``), converted to
    the unit the library takes (``to``) and checked by the schema type like any number. A bare number is in
    ``bare`` (printed in the option's help). A value that is not text (a default) is already in ``to``."""

    def __init__(self, dimension: str, bare: str, to: str, kind: type = float, name: str | None = None,
                 **bounds: float):
        super().__init__(number(kind, **bounds).annotation, name or dimension)
        self.dimension, self.bare, self.to, self.kind = dimension, bare, to, kind
        signs = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
        self.bounds_text = " and ".join(f"{signs[k]} {v:g} {to}" for k, v in bounds.items())

    @property
    def help_suffix(self) -> str:
        examples = "30s, 5m, 72h" if self.dimension == "duration" else "100G, 25Gb/s, 20M"
        return f"[{examples}; bare number: {units.unit_word(self.bare)}]"

    def convert(self, value, param, ctx):
        if not isinstance(value, str):
            return super().convert(value, param, ctx)
        if units.is_bare(value) and self.bare == self.to:
            return super().convert(value, param, ctx)     # the schema's own message: must be > 0 (got '-5')
        if units.is_number(value) and not units.is_bare(value) and not math.isfinite(float(value)):
            self.fail(f"must be a finite number (got {value!r})", param, ctx)
        parse = units.parse_duration if self.dimension == "duration" else units.parse_rate
        try:
            exact = units.in_unit(parse(value, self.bare), self.to)
        except units.UnitError as exc:
            self.fail(f"{value!r}: {exc}", param, ctx)
        bare = f" (a bare number is {units.unit_word(self.bare)})" if units.is_bare(value) and self.bare != self.to else ""
        said = f"{value!r}{bare} is {exact.normalize():f} {self.to}"
        if self.kind is int and exact != exact.to_integral_value():
            self.fail(f"{said}: a whole number of {units.unit_word(self.to)} is needed", param, ctx)
        try:
            return check_value(self.annotation, self.kind(exact), strict=False)
        except ValueError:
            self.fail(f"{said}: must be {self.bounds_text}", param, ctx)


def duration(bare: str = "s", to: str | None = None, kind: type = float, **bounds: float) -> Quantity:
    """A duration option: ``duration(gt=0)`` takes 30s, 5m, 72h; bare numbers in ``bare``; returns ``to`` units."""
    return Quantity("duration", bare, to or bare, kind, **bounds)


def rate(bare: str = "Gb/s", to: str | None = None, kind: type = float, **bounds: float) -> Quantity:
    """A bit-rate option: ``rate(to="Mb/s", kind=int, ge=1)`` takes 100G, 25Gb/s, 20M; bare numbers in Gb/s."""
    return Quantity("rate", bare, to or bare, kind, **bounds)


class TcRate(Quantity):
    """A link rate for tc (``20M``, ``200mbit``, ``1G``; bare numbers Gb/s) as tc writes it (``20mbit``), or off."""

    def __init__(self):
        super().__init__("rate", "Gb/s", "kb/s", int, name="rate|off", gt=0)

    def convert(self, value, param, ctx):
        if str(value).strip().lower() == "off":
            return "off"
        kbit = super().convert(value, param, ctx)
        return f"{kbit // 1000}mbit" if kbit % 1000 == 0 else f"{kbit}kbit"

    @property
    def help_suffix(self) -> str:
        return super().help_suffix[:-1] + "; off removes the limit]"


TC_RATE = TcRate()


class SeveralValues(click.Option):
    """A repeatable option that also takes several values after one flag, as a shell expands a glob:
    ``--evidence runs/*`` is ``--evidence runs/a --evidence runs/b``; values end at the next option."""

    def __init__(self, *args, **kwargs):
        kwargs["multiple"] = True
        super().__init__(*args, **kwargs)

    def add_to_parser(self, parser, ctx) -> None:
        super().add_to_parser(parser, ctx)
        for opt in self.opts:
            parsed = parser._long_opt.get(opt) or parser._short_opt.get(opt)
            if parsed is not None:
                parsed.process = self._greedy(parsed.process)

    @staticmethod
    def _greedy(process):
        def take_all(value, state) -> None:
            process(value, state)
            while state.rargs and not state.rargs[0].startswith("-"):
                process(state.rargs.pop(0), state)
        return take_all
