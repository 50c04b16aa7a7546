"""The validation layer's base (fxprobe.core.schema): one BadInput line naming file and field, for every kind of bad value."""

from __future__ import annotations

from typing import Literal

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import (Band, ByteSize, InputModel, Percent, PositiveInt, Seconds, check_value,
                                 load_toml_model, parse_json, read_json, read_jsonl, size_bytes, validate)


class Inner(InputModel):
    threads: PositiveInt = 4
    cache: Literal["cold", "warm"] = "cold"
    size: ByteSize = 4096


class Outer(InputModel):
    kind: Literal["a", "b"]
    inner: Inner = Inner()
    band: Band | None = None
    share: Percent = 50.0
    runtime: Seconds = 1.0
    rows: list[Inner] = []
    named: dict[str, Inner] = {}


@pytest.mark.parametrize("data, expected", [
    ({"kind": "a", "inner": {"threads": -1}}, "field 'inner.threads': must be >= 1 (got -1)"),
    ({"kind": "a", "inner": {"threads": 23.5}}, "field 'inner.threads': expected a whole number (got 23.5)"),
    ({"kind": "a", "inner": {"threads": True}}, "field 'inner.threads': expected a whole number (got True)"),
    ({"kind": "c"}, "field 'kind': must be one of 'a' or 'b' (got 'c')"),
    ({}, "field 'kind': missing; add it"),
    ({"kind": "a", "inner": {"foo": 1}}, "field 'inner.foo': unknown key; allowed here: cache, size, threads"),
    ({"kind": "a", "band": {"min": 3, "max": 1}}, "field 'band.max': is below min (1 < 3); write min <= max"),
    ({"kind": "a", "band": {"min": float("nan"), "max": 1}}, "field 'band.min': must be a finite number (got nan)"),
    ({"kind": "a", "share": 101}, "field 'share': must be <= 100"),
    ({"kind": "a", "runtime": float("inf")}, "field 'runtime': must be a finite number (got inf)"),
    ({"kind": "a", "runtime": 0}, "field 'runtime': must be > 0 (got 0)"),
    ({"kind": "a", "rows": [{}, {"cache": "hot"}]}, "field 'rows[1].cache': must be one of 'cold' or 'warm'"),
    ({"kind": "a", "named": {"x": {"size": "12Q"}}}, "field 'named.x.size': '12Q' is not a size"),
    ({"kind": "a", "inner": 3}, "field 'inner': expected a table (got 3)"),
    ([], "top level: expected a table"),
])
def test_one_line_names_file_and_field(data, expected):
    with pytest.raises(BadInput) as info:
        validate(Outer, data, "f.toml")
    text = str(info.value)
    assert text.startswith("f.toml: ") and expected in text and "\n" not in text


def test_more_errors_are_counted_on_the_same_line():
    with pytest.raises(BadInput, match=r"\(and 2 more: 'inner.threads', 'share'\)$"):
        validate(Outer, {"kind": "z", "inner": {"threads": 0}, "share": -1}, "f.toml")


def test_sizes_and_option_strings():
    assert size_bytes("64MiB") == 64 << 20 and size_bytes("65.6GB") == 65_600_000_000 and size_bytes(4096) == 4096
    assert check_value(PositiveInt, "8", strict=False) == 8
    for bad in ("abc", "3.5", "0", "-1", "nan"):
        with pytest.raises(ValueError):
            check_value(PositiveInt, bad, strict=False)


def test_toml_and_json_readers(tmp_path):
    good = tmp_path / "p.toml"
    good.write_text('kind = "a"\n[inner]\nthreads = 2\n')
    assert load_toml_model(good, Outer, "test file").inner.threads == 2
    nan = tmp_path / "nan.toml"
    nan.write_text('kind = "a"\nruntime = nan\n')
    with pytest.raises(BadInput, match=r"nan.toml: field 'runtime': must be a finite number"):
        load_toml_model(nan, Outer, "test file")
    with pytest.raises(BadInput, match="is a folder"):
        load_toml_model(tmp_path, Outer, "test file")
    js = tmp_path / "x.json"
    js.write_text('{"kind": "a", "share": NaN}')
    with pytest.raises(BadInput, match=r"x.json: NaN is not a number JSON allows"):
        validate(Outer, read_json(js, "test file"), str(js))
    js.write_bytes(b'{"kind": "\xff"}')
    with pytest.raises(BadInput, match="not UTF-8"):
        validate(Outer, read_json(js, "test file"), str(js))
    with pytest.raises(BadInput, match=r"s: not valid JSON \(line 1 column 2"):
        parse_json("{", "s")
    lines = tmp_path / "r.jsonl"
    lines.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(BadInput, match=r"r.jsonl: line 3: not valid JSON"):
        read_jsonl(lines, "records")
