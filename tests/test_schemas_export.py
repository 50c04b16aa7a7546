"""The JSON Schema files in schemas/ are current, and another tool (jsonschema) accepts what fxprobe ships
with them and refuses what fxprobe refuses."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCHEMAS = ROOT / "schemas"


def schema(stem: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{stem}.schema.json").read_text()))


def test_exported_schemas_are_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts/export-schemas"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr


def _keys(node):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value)


@pytest.mark.parametrize("path", sorted(SCHEMAS.glob("*.schema.json")), ids=lambda p: p.name)
def test_exported_schemas_are_json_schema(path):
    data = json.loads(path.read_text())
    jsonschema.Draft202012Validator.check_schema(data)
    leaked = {"gt", "ge", "lt", "le"} & set(_keys(data))      # a pydantic constraint JSON Schema does not know
    assert not leaked, f"{path.name}: {leaked}"


@pytest.mark.parametrize("stem, files", [
    ("profile", sorted((ROOT / "profiles").glob("*.toml"))),
    ("fault-scenario", sorted((ROOT / "faults").glob("*.toml"))),
    ("gates", [ROOT / "gates.toml", ROOT / "gates-lab.toml"]),
    ("claims", sorted((ROOT / "examples/claims").glob("*.toml"))),
])
def test_shipped_files_validate_with_another_tool(stem, files):
    assert files
    validator = schema(stem)
    for path in files:
        errors = [e.message for e in validator.iter_errors(tomllib.loads(path.read_text()))]
        assert not errors, f"{path}: {errors}"


@pytest.mark.parametrize("stem, data, words", [
    ("gates", {"g1": {"drives_expected": 0}}, "less than the minimum"),
    ("gates", {"g1": {"drives_expected": 23.5}}, "is not of type 'integer'"),
    ("gates", {"g9": {}}, "Additional properties are not allowed"),
    ("gates", {"scale": {"not_judged": {"g2.baseline_tolerance_pct": "no lab"}}}, "is expected to be empty"),
    ("gates", {"scale": {"lab_scaled": False, "scaled": {"g4.soak_hours_min": "short"}}}, "is expected to be empty"),
    ("profile", {"kind": "kv-read", "kv": {"threads": -1}}, "-1 is not valid under any of the given schemas"),
    ("profile", {"kind": "kv-reed"}, "is not one of"),
    ("fault-scenario", {"fault": {"kind": "drive-pull"}, "criteria": {"min_throughput_pct": 150}}, "greater than"),
    ("vllm-bench-serve", {"median_ttft_ms": -5}, "-5 is not valid under any of the given schemas"),
    ("results", {"command": "run", "outcome": "maybe"}, "'maybe' is not valid under any of the given schemas"),
])
def test_another_tool_refuses_what_fxprobe_refuses(stem, data, words):
    errors = " | ".join(e.message for e in schema(stem).iter_errors(data))
    assert words in errors, errors


def test_a_run_folder_fxprobe_writes_validates(tmp_path):
    from fxprobe.cli.main import main
    assert main(["--run-dir", str(tmp_path / "run"), "model-switch", "--switches", "20", "--load-time", "90"]) == 0
    results = json.loads((tmp_path / "run/results.json").read_text())
    assert results["schema_version"] == 1
    assert not [e.message for e in schema("results").iter_errors(results)]
