"""The one validation layer: pydantic v2 models for everything a person or another tool hands fxprobe.

Every reader (profiles, fault scenarios, gates.toml, claims, serial lists, benchmark JSON, run folders given
as evidence, numeric options) declares a model built from the pieces here, so types, ranges, unknown keys
and cross-field rules live in the model, and every failure becomes ONE BadInput line (exit 2) that names the
file, the field (pydantic's loc, dotted) and what to do:

    profiles/x.toml: field 'kv.threads': must be >= 1 (got -1)

Rules every model inherits from ``InputModel``:
- unknown keys are refused (``extra="forbid"``), and the message lists the keys allowed there;
- floats are finite (NaN and inf are refused, also when they arrive as TOML ``nan``/``inf`` or JSON ``NaN``);
- types are strict: ``true`` is not 1, ``23.5`` is not a count, ``"3"`` is not a number in a file
  (command-line strings are validated with ``strict=False``, so ``--set iodepth=8`` converts but ``abc`` does not).
"""

from __future__ import annotations

import collections.abc
import json
import math
import re
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Callable, Literal, TypeVar

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, TypeAdapter, ValidationError,
                      ValidationInfo, WithJsonSchema, field_validator)

from fxprobe.core.errors import BadInput
from fxprobe.core.tomlfile import read_text, read_toml

M = TypeVar("M", bound=BaseModel)


class InputModel(BaseModel):
    """Base of every model fxprobe validates input with: unknown keys refused, finite floats, strict types."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True, frozen=True, validate_default=True)


# --------------------------------------------------------------------------- helper types
FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
NonNegativeFloat = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Percent = Annotated[float, Field(ge=0, le=100, allow_inf_nan=False, description="percent, 0-100")]
PositiveInt = Annotated[int, Field(ge=1, description="whole number >= 1")]
NonNegativeInt = Annotated[int, Field(ge=0, description="whole number >= 0")]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False, description="seconds, > 0")]
NonNegativeSeconds = Annotated[float, Field(ge=0, allow_inf_nan=False, description="seconds, >= 0")]
NonEmptyStr = Annotated[str, Field(min_length=1)]
VerifyMethod = Literal["crc32c", "crc32c-intel", "md5", "sha256", "sha512", "xxhash", "off"]   # fio verify=

_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kib": 1024, "m": 1024**2, "mib": 1024**2, "g": 1024**3,
               "gib": 1024**3, "t": 1024**4, "tib": 1024**4, "kb": 1000, "mb": 1000**2,
               "gb": 1000**3, "tb": 1000**4}


_SIZE_PATTERN = r"^\s*[0-9]*\.?[0-9]+\s*([KkMmGgTt]([Ii][Bb]|[Bb])?|[Bb])?\s*$"


def size_bytes(value: Any) -> int:
    """Bytes from 4096, "160K", "64MiB", "65.6GB" (K/M/G and KiB... binary, kB/MB/GB decimal); ValueError else."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a size (bytes, or a number with K, M, G, KiB, MiB, GiB, kB, MB, GB), "
                         f"got {_show(value)}")
    if isinstance(value, str):
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([A-Za-z]*)\s*", value)
        unit = match.group(2).lower() if match else None
        if not match or unit not in _SIZE_UNITS:
            raise ValueError(f"{value!r} is not a size; write bytes or a number with K, M, G, KiB, MiB, GiB, "
                             "kB, MB, GB")
        number = float(match.group(1)) * _SIZE_UNITS[unit]
    else:
        number = float(value)
    if not math.isfinite(number) or number <= 0:
        raise ValueError(f"size must be > 0 (got {value!r})")
    return int(round(number))


ByteSize = Annotated[int, BeforeValidator(size_bytes), Field(ge=1),
                     WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                               {"type": "string", "pattern": _SIZE_PATTERN}],
                                     "description": "bytes, or a number with K, M, G, KiB.. (binary) "
                                                    "or kB, MB, GB (decimal)"})]


def finite_number(value: Any) -> int | float:
    """An int or a finite float as given (not a bool, not text); ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"expected a number (got {_show(value)})")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"must be a finite number (got {value!r})")
    return value


Number = Annotated[Any, BeforeValidator(finite_number), WithJsonSchema({"type": "number"})]


def _size_as_written(value: Any) -> Any:
    size_bytes(value)
    return value


SizeAsWritten = Annotated[Any, BeforeValidator(_size_as_written),
                          WithJsonSchema({"anyOf": [{"type": "integer", "minimum": 1},
                                                    {"type": "string", "pattern": _SIZE_PATTERN}],
                                          "description": "a size kept as written (\"4k\" is handed to fio as 4k)"})]


def beside(field: str, other: str, problem: Callable[[Any, Any], str | None]):
    """A field validator of ``field`` that judges it beside the model's ``other`` field (declared before it):
    ``problem(value, other's value)`` says what is wrong, or None. The error names ``field``; when ``other`` itself
    is invalid, its own error is the one reported."""
    def check(cls, value: Any, info: ValidationInfo) -> Any:
        if other in info.data and (text := problem(value, info.data[other])):
            raise ValueError(text)
        return value
    return field_validator(field)(classmethod(check))


def not_below(low_field: str, high_field: str):
    """A field validator of ``high_field``: refuses a value below the model's ``low_field`` (min <= max)."""
    return beside(high_field, low_field, lambda high, low: (
        f"is below {low_field} ({high:g} < {low:g}); write min <= max"
        if low is not None and high is not None and low > high else None))


class Band(InputModel):
    """An inclusive band [min, max] with min <= max."""

    min: FiniteFloat
    max: FiniteFloat

    _ordered = not_below("min", "max")


# --------------------------------------------------------------------------- errors -> one line
def _show(value: Any, limit: int = 40) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unwrap(annotation: Any) -> list[Any]:
    """The classes inside Optional[...], X | Y, list[...], dict[str, ...], Annotated[...], tuple[...]."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType, list, tuple, set, frozenset, dict,
                  collections.abc.Sequence, collections.abc.Mapping):
        args = typing.get_args(annotation)
        if origin is dict:
            args = args[1:]
        return [inner for arg in args for inner in _unwrap(arg)]
    return [annotation]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    return [c for c in _unwrap(annotation) if isinstance(c, type) and issubclass(c, BaseModel)]


def _is_mapping(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _is_mapping(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_mapping(arg) for arg in typing.get_args(annotation))
    return origin in (dict, collections.abc.Mapping)


def _walk(model: type[BaseModel] | None, loc: tuple) -> tuple[str, list[type[BaseModel]]]:
    """The dotted field path of ``loc`` (union tags dropped) and the models that should hold its last key."""
    parts: list[str] = []
    current: list[type[BaseModel]] = [model] if model else []
    parents: list[type[BaseModel]] = current
    mapping_key = False
    for index, key in enumerate(loc):
        if isinstance(key, int) or mapping_key:
            parts.append(f"[{key}]" if isinstance(key, int) else f".{key}")
            mapping_key = False
            continue
        owners = [m for m in current if key in m.model_fields]
        if current and not owners and index < len(loc) - 1:
            continue                       # a union member's tag, e.g. 'int' or 'function-after[...]'
        parts.append(f".{key}")
        parents = current
        annotations = [m.model_fields[key].annotation for m in owners]
        mapping_key = any(_is_mapping(a) for a in annotations)
        current = [inner for a in annotations for inner in _models_in(a)]
    return "".join(parts).lstrip("."), parents


def _problem(error: dict, allowed: list[str]) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    got = f" (got {_show(value)})"
    if kind == "extra_forbidden":
        return "unknown key" + (f"; allowed here: {', '.join(allowed)}" if allowed else "; remove it")
    if kind == "missing":
        return "missing; add it"
    if kind == "finite_number":
        return f"must be a finite number{got}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<", "less_than_equal": "<="}[kind]
        bound = next(iter(ctx.values()), "?")
        bound = f"{bound:g}" if isinstance(bound, float) else bound
        return f"must be {sign} {bound}{got}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"expected a whole number{got}"
    if kind in ("float_type", "float_parsing"):
        return f"expected a number{got}"
    if kind in ("bool_type", "bool_parsing"):
        return f"expected true or false{got}"
    if kind in ("string_type",):
        return f"expected text{got}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"expected a table{got}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list{got}"
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected', '?')}{got}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    if kind == "string_too_short":
        return f"must not be empty{got}"
    return f"{error['msg'][:1].lower()}{error['msg'][1:]}{got}"


def describe(exc: ValidationError, source: str, model: type[BaseModel] | None = None) -> str:
    """One line for the first error (and how many more): ``source: field 'a.b': problem``."""
    errors = exc.errors(include_url=False)
    lines = []
    for error in errors:
        path, parents = _walk(model, tuple(error["loc"]))
        allowed = sorted({name for m in parents for name in m.model_fields}) if parents else []
        where = f"field '{path}'" if path else "top level"
        lines.append((path, f"{where}: {_problem(error, allowed)}"))
    text = f"{source}: {lines[0][1]}"
    if len(lines) > 1:
        others = ", ".join(f"'{p or 'top level'}'" for p, _ in lines[1:4]) + (", ..." if len(lines) > 4 else "")
        text += f" (and {len(lines) - 1} more: {others})"
    return text


# --------------------------------------------------------------------------- validating and loading
def validate(model: type[M], data: Any, source: str, *, strict: bool | None = None) -> M:
    """``model`` built from ``data``; a ValidationError becomes BadInput naming ``source`` and the field."""
    try:
        return model.model_validate(data, strict=strict)
    except ValidationError as exc:
        raise BadInput(describe(exc, source, model)) from None


def check_value(annotation: Any, value: Any, *, strict: bool | None = None) -> Any:
    """One value checked against a type such as ``PositiveInt``; ValueError says what is wrong with it."""
    try:
        return TypeAdapter(annotation).validate_python(value, strict=strict)
    except ValidationError as exc:
        raise ValueError(_problem(exc.errors(include_url=False)[0], [])) from None


def load_toml_model(path: Path | str, model: type[M], what: str) -> M:
    """A TOML file (``what``: "profile file", "gates file"...) validated against ``model``."""
    return validate(model, read_toml(path, what), str(path))


def _refuse_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def parse_json(text: str, source: str) -> Any:
    """JSON text; NaN/Infinity (which Python's json accepts) and bad syntax are one BadInput line."""
    try:
        return json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise BadInput(f"{source}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})") from None
    except ValueError as exc:
        raise BadInput(f"{source}: {exc}") from None
    except RecursionError:
        raise BadInput(f"{source}: JSON nested too deeply") from None


def read_json(path: Path | str, what: str) -> Any:
    """A JSON file: missing, a folder, not UTF-8, unreadable or not JSON are one BadInput line."""
    return parse_json(read_text(path, what), str(path))


def read_jsonl(path: Path | str, what: str) -> list[Any]:
    """A JSON-lines file (blank lines skipped); a bad line is named by its number."""
    text = read_text(path, what)
    return [parse_json(line, f"{path}: line {number}")
            for number, line in enumerate(text.splitlines(), 1) if line.strip()]


# --------------------------------------------------------------------------- versions and export
def json_schema(model: Any, *, title: str | None = None) -> dict:
    """The JSON Schema (draft 2020-12) of ``model`` - a model class, or any type pydantic validates (a union of
    record models, say) - as exported to schemas/NAME.schema.json."""
    if isinstance(model, type) and issubclass(model, BaseModel):
        schema = model.model_json_schema(mode="validation")
    else:
        schema = TypeAdapter(model).json_schema(mode="validation")
    schema = {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
    if title:
        schema["title"] = title
    return schema


def schema_text(model: Any, *, title: str | None = None) -> str:
    return json.dumps(json_schema(model, title=title), indent=2, sort_keys=True) + "\n"
