"""The adversary suite (issue 13, Must-show 2): for every reader of what a person or another tool hands
fxprobe, generated malformed inputs - wrong types, NaN/inf, negatives, missing and extra keys, truncation,
non-UTF-8 bytes, a folder where a file belongs - give exit 2 and one line naming the file and the field,
never exit 4 (an internal error) or a traceback.

Each base document is a real one (a shipped profile, scenario, gates.toml, claims file, a benchmark fixture, a
run folder fxprobe wrote); each mutation is invalid by construction, so the oracle is the rule itself, not
fxprobe's schema. FXPROBE_ADVERSARY_EXAMPLES raises the number of examples (default 15 per reader);
FXPROBE_ADVERSARY_LOG=FILE appends one line per input tried: reader, class of bad input, exit code.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import tempfile
import tomllib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from fxprobe.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "tests/fixtures/bench"
SETTINGS = settings(max_examples=int(os.environ.get("FXPROBE_ADVERSARY_EXAMPLES", "15")), deadline=None,
                    derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
WORK = Path(tempfile.mkdtemp(prefix="fxprobe-adversary-"))
atexit.register(shutil.rmtree, WORK, True)   # hundreds of generated files: not left in /tmp


# --------------------------------------------------------------------------- running and judging
def cli(*args: str) -> tuple[int, str]:
    import contextlib
    import io
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = main(["--runs", str(WORK / "runs"), *args])
    return code, err.getvalue() + out.getvalue()


def record(reader: str, kind: str, code: int) -> None:
    log = os.environ.get("FXPROBE_ADVERSARY_LOG")
    if log:
        with open(log, "a") as handle:
            handle.write(f"{reader}\t{kind}\t{code}\n")


def refused(reader: str, kind: str, args: list[str], path: Path, field: str | None = None,
            allow_ok: bool = False) -> None:
    """The CLI refused the input: exit 2, one line naming ``path`` (and ``field``), no internal error."""
    code, text = cli(*args)
    record(reader, kind, code)
    what = f"{reader}, {kind}, field {field}: exit {code}: {text}"
    assert "Traceback" not in text and "internal error" not in text, what
    if allow_ok and code != 2:           # a cut that still parses (at a line end) may be used: never exit 4
        assert code in (0, 1, 3), what
        return
    lines = [line for line in text.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and str(path) in lines[0], what
    if field is not None:                # the field, or an item of it (field 'argv[0]' for argv)
        assert f"field '{field}" in lines[0] or f"{field}:" in lines[0] or f"{field}=" in lines[0], what


# --------------------------------------------------------------------------- documents and mutations
def toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(repr(value), repr(value))
    if isinstance(value, (int,)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise TypeError(value)


def toml_dump(data: dict) -> str:
    """Top-level keys, then [tables], then [[arrays of tables]] (enough for fxprobe's files)."""
    head, tail = [], []
    for key, value in data.items():
        if isinstance(value, dict) and value and all(not isinstance(v, dict) for v in value.values()):
            tail.append(f"[{json.dumps(key)}]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in value.items()))
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tail += [f"[[{json.dumps(key)}]]\n" + "".join(f"{json.dumps(k)} = {toml_value(v)}\n" for k, v in row.items())
                     for row in value]
        else:
            head.append(f"{json.dumps(key)} = {toml_value(value)}\n")
    return "".join(head) + "\n".join(tail)


def leaves(data, prefix=()):
    """(path, value) of every scalar in a document; a path is a tuple of keys and list indexes."""
    if isinstance(data, dict):
        for key, value in data.items():
            yield from leaves(value, prefix + (key,))
    elif isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        for index, value in enumerate(data):
            yield from leaves(value, prefix + (index,))
    else:
        yield prefix, data


def tables(data, prefix=()):
    if isinstance(data, dict):
        yield prefix
        for key, value in data.items():
            yield from tables(value, prefix + (key,))
    elif isinstance(data, list) and data and all(isinstance(v, dict) for v in data):
        for index, value in enumerate(data):
            yield from tables(value, prefix + (index,))


def dotted(path) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def put(data, path, value):
    data = json.loads(json.dumps(data))
    node = data
    for key in path[:-1]:
        node = node[key]
    if value is DELETE:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    return data


DELETE = object()


def wrong_for(value, path=()):
    """Values that no field holding ``value`` accepts: a number gets NaN, inf, text, true or a table (not text
    where a claim's figure is: text there is an expression)."""
    if isinstance(value, bool):
        return st.sampled_from([{"t": 1}, "yes", 1.5])
    if isinstance(value, (int, float)):
        text = [] if "claimed" in path else ["abc"]
        return st.sampled_from([float("nan"), float("inf"), float("-inf"), True, {"t": 1}, [1, 2, 3]] + text)
    return st.sampled_from([{"t": 1}, [{"t": 1}], True])


@st.composite
def mutation(draw, doc: dict, positive: dict[str, object], required: list[tuple]):
    """(kind, mutated document, dotted field expected in the message)."""
    kinds = ["wrong type", "extra key"] + (["negative or zero"] if positive else []) + \
        (["missing key"] if required else [])
    kind = draw(st.sampled_from(kinds))
    if kind == "wrong type":
        path, value = draw(st.sampled_from([(p, v) for p, v in leaves(doc) if p]))
        return kind, put(doc, path, draw(wrong_for(value, path))), dotted(path)
    if kind == "extra key":
        table = draw(st.sampled_from([t for t in tables(doc)]))
        name = "zz" + draw(st.text("abcdefgh_", min_size=1, max_size=6))
        return kind, put(doc, table + (name,), "x"), dotted(table + (name,))
    if kind == "negative or zero":
        key = draw(st.sampled_from(sorted(positive)))
        path = tuple(int(p) if p.isdigit() else p for p in key.split("."))
        return kind, put(doc, path, draw(st.sampled_from([0, -1, -2.5, -10**9]) if positive[key] == ">0"
                                         else st.sampled_from([-1, -0.001, -10**9]))), dotted(path)
    path = draw(st.sampled_from(required))
    return kind, put(doc, path, DELETE), dotted(path)


def write(name: str, data: bytes | str) -> Path:
    folder = Path(tempfile.mkdtemp(dir=WORK))
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return path


@st.composite
def damaged_bytes(draw, text: str):
    """(kind, bytes): cut short, or with a byte that is not UTF-8."""
    raw = text.encode()
    if draw(st.booleans()):
        return "truncated", raw[:draw(st.integers(0, max(0, len(raw) - 1)))]
    at = draw(st.integers(0, len(raw)))
    return "not UTF-8", raw[:at] + b"\xff\xfe" + raw[at:]


# --------------------------------------------------------------------------- the TOML readers
def _docs(pattern: str) -> list[tuple[str, dict]]:
    return [(p.name, tomllib.loads(p.read_text())) for p in sorted(ROOT.glob(pattern))]


TOML_READERS = {
    # reader: (base documents, command line with {}, fields that must be > 0 (">0") or >= 0 (">=0"), required)
    "profile": (_docs("profiles/*.toml"), ["profile", "show", "{}"],
                {"kv.threads": ">0", "kv.concurrency": ">0", "kv.chunk_tokens": ">0", "run.runtime": ">0",
                 "run.ramp": ">=0", "run.repeats": ">0"}, [("kind",)]),
    "fault scenario": (_docs("faults/*.toml"), ["fault", "run", "{}", "--dry-run"],
                       {"timing.fault_s": ">=0", "timing.recover_s": ">=0", "load.iodepth": ">0",
                        "load.log_msec": ">0", "criteria.max_errors": ">=0", "criteria.max_stall_s": ">=0",
                        "criteria.max_p99_ratio": ">0"}, [("fault",), ("fault", "kind"), ("timing",), ("criteria",)]),
    "gates.toml": (_docs("gates*.toml"), ["gate", "g1", "--config", "{}"],   # the buyer's and the lab-scaled
                   {"g1.drives_expected": ">0", "g3.nodes_sharing": ">0", "g4.soak_hours_min": ">0",
                    "g4.interruptions_max": ">=0", "g2.line_efficiency_min_pct": ">=0", "g4.fault_stall_max_s": ">=0",
                    "g4.fault_throughput_min_pct": ">=0", "g4.fault_p99_ratio_max": ">0"}, []),
    "claims file": (_docs("examples/claims/*.toml"), ["claims", "check", "{}"], {"claims.0.tolerance": ">=0"},
                    [("claims",), ("claims", 0, "id"), ("claims", 0, "kind")]),
    "reference table": (_docs("examples/claims/reference-r2.toml"),
                        ["gate", "g2", "--measured", str(BENCH / "r2-array-c8.json"), "--reference", "{}"],
                        {"rows.0.concurrency": ">0", "rows.0.array_ttft_s": ">0"}, []),
}


def _args(template: list[str], path: Path) -> list[str]:
    return [str(path) if part == "{}" else part for part in template]


@pytest.mark.parametrize("reader", sorted(TOML_READERS))
@SETTINGS
@given(data=st.data())
def test_toml_readers_refuse_malformed_documents(reader, data):
    docs, template, positive, required = TOML_READERS[reader]
    name, doc = data.draw(st.sampled_from(docs))
    usable = {k: v for k, v in positive.items() if _has(doc, k)}
    kind, mutated, field = data.draw(mutation(doc, usable, [r for r in required if _has(doc, dotted(r))]))
    path = write(name, toml_dump(mutated))
    refused(reader, kind, _args(template, path), path, field)


@pytest.mark.parametrize("reader", sorted(TOML_READERS))
@SETTINGS
@given(data=st.data())
def test_toml_readers_refuse_damaged_files(reader, data):
    docs, template, _, _ = TOML_READERS[reader]
    name, doc = data.draw(st.sampled_from(docs))
    kind, raw = data.draw(damaged_bytes(toml_dump(doc)))
    path = write(name, raw)
    refused(reader, kind, _args(template, path), path, allow_ok=kind == "truncated")


@pytest.mark.parametrize("reader", sorted(TOML_READERS) + ["serial list", "benchmark", "run folder"])
def test_a_folder_where_a_file_belongs_is_refused(reader):
    folder = Path(tempfile.mkdtemp(dir=WORK)) / "x.toml"
    folder.mkdir()
    args = {"serial list": ["selftest", "--serials", "{}"],
            "benchmark": ["gate", "g3", "--candidate", "{}", "--baseline", str(BENCH / "r2-local-nvme-c8.json")],
            "run folder": ["gate", "all", "--evidence", "{}"]}.get(reader) or TOML_READERS[reader][1]
    refused(reader, "folder", _args(args, folder), folder)


def _has(doc, key: str) -> bool:
    node = doc
    for part in key.split("."):
        part = int(part) if part.isdigit() else part
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    return True


# --------------------------------------------------------------------------- serial lists
@SETTINGS
@given(data=st.data())
def test_serial_lists_refuse_malformed_lines(data):
    good = [f"{i} SN{i:02d}" for i in range(4)]
    kind, line = data.draw(st.sampled_from([
        ("three fields", "5 SN05 extra"), ("serial too long", "5 " + "S" * 21), ("control character", "5 S\x01N"),
        ("serial twice", "5 SN01"), ("slot twice", "1 SN99")]))
    at = data.draw(st.integers(0, len(good)))
    path = write("serials.txt", "\n".join(good[:at] + [line] + good[at:]) + "\n")
    code, text = cli("selftest", "--serials", str(path))
    record("serial list", kind, code)
    assert code == 2 and text.count("\n") == 1 and f"{path}:" in text and "internal error" not in text, text


# --------------------------------------------------------------------------- benchmark JSON
VLLM = {"date": "20261201-120000", "backend": "vllm", "model_id": "Qwen/Qwen2.5-7B-Instruct", "num_prompts": 64,
        "max_concurrency": 8, "duration": 61.2, "completed": 64, "failed": 0, "total_input_tokens": 120000,
        "request_throughput": 1.05, "output_throughput": 134.2, "total_token_throughput": 2100.5,
        "mean_ttft_ms": 520.4, "median_ttft_ms": 498.1, "p90_ttft_ms": 700.2, "p99_ttft_ms": 910.7}
TYPED = {"completed": "count", "failed": "zero", "max_concurrency": "count", "median_ttft_ms": "positive",
         "p90_ttft_ms": "positive", "p99_ttft_ms": "positive", "mean_ttft_ms": "positive",
         "output_throughput": "positive", "request_throughput": "positive", "total_input_tokens": "count"}


@st.composite
def bad_benchmark(draw):
    key = draw(st.sampled_from(sorted(TYPED)))
    rule = TYPED[key]
    bad = {"positive": st.sampled_from([0, -1, -498.1, "fast", True, [1], {"ms": 1}]),
           "count": st.sampled_from([-1, 2.5, "many", True, [1]]),
           "zero": st.sampled_from([1, 3, -1, 2.5, "none", True])}[rule]
    if key == "completed":
        bad = st.sampled_from([0, -1, 2.5, "many", True])
    return key, {**VLLM, key: draw(bad)}


@SETTINGS
@given(case=bad_benchmark())
def test_benchmark_json_refuses_impossible_figures(case):
    key, doc = case
    path = write("bench.json", json.dumps(doc))
    refused("benchmark", "impossible figure", ["gate", "g3", "--candidate", str(path), "--baseline",
                                               str(BENCH / "r2-local-nvme-c8.json")], path, key)


@SETTINGS
@given(data=st.data())
def test_benchmark_json_refuses_damaged_files(data):
    text = json.dumps(VLLM, indent=2)
    choice = data.draw(st.sampled_from(["damaged", "NaN", "top level"]))
    if choice == "NaN":
        key = data.draw(st.sampled_from(sorted(k for k, v in TYPED.items() if v == "positive")))
        raw, kind = text.replace(f'"{key}": {VLLM[key]}', f'"{key}": ' + data.draw(
            st.sampled_from(["NaN", "Infinity", "-Infinity"]))).encode(), "NaN/inf"
    elif choice == "top level":
        raw, kind = data.draw(st.sampled_from([b"[1, 2]", b'"x"', b"42", b"null"])), "not an object"
    else:
        kind, raw = data.draw(damaged_bytes(text))
    path = write("bench.json", raw)
    refused("benchmark", kind, ["gate", "g3", "--candidate", str(path), "--baseline",
                                str(BENCH / "r2-local-nvme-c8.json")], path, allow_ok=kind == "truncated")


# --------------------------------------------------------------------------- run folders given as evidence
def _run_folder() -> tuple[Path, dict, list[dict]]:
    folder = Path(tempfile.mkdtemp(dir=WORK)) / "run"
    os.environ["FXPROBE_MACHINE_LEDGER"] = str(folder.parent / "ledger.jsonl")   # one line each: the same length
    assert main(["--run-dir", str(folder), "--json", "-q", "model-switch", "--switches", "20", "--load-time", "90"]) == 0
    results = json.loads((folder / "results.json").read_text())
    command = {"schema_version": 1, "name": "0001-version-fio", "argv": ["fio", "--version"],
               "host": {"name": "local", "kind": "local"}, "cwd": "/", "env": {"LANG": "C.UTF-8"},
               "started": "2026-12-03T14:48:50.419Z", "ended": "2026-12-03T14:48:50.527Z", "seconds": 0.108,
               "exit_code": 0, "timed_out": False, "dry_run": False, "background": False,
               "stdout": "0001-version-fio.stdout", "stderr": "0001-version-fio.stderr"}
    return folder, results, [command]


ENVELOPE_TYPED = ("schema_version", "command", "argv", "started", "finished", "outcome", "reason", "exit_code",
                  "run_dir")
VERDICT = {"name": "selftest", "outcome": "pass", "reason": "",
           "criteria": [{"name": "drives recognized", "outcome": "pass", "measured": 24, "threshold": 24,
                         "comparator": ">=", "unit": "", "detail": "", "evidence": ""}]}


@st.composite
def bad_envelope(draw, results: dict):
    results = {**results, "command": "selftest", "verdict": VERDICT}
    choice = draw(st.sampled_from(["envelope field", "verdict field", "criterion field"]))
    if choice == "envelope field":
        key = draw(st.sampled_from(ENVELOPE_TYPED))
        value = draw(st.sampled_from([{"t": 1}, [{"t": 1}], True] + (["maybe", 7] if key == "outcome" else []) +
                                     ([-1, 0, "1"] if key == "schema_version" else [])))
        return choice, {**results, key: value}, key
    if choice == "verdict field":
        key = draw(st.sampled_from(["name", "outcome", "criteria"]))
        value = draw(st.sampled_from([{"t": 1}, 3, "x"] if key == "criteria" else [{"t": 1}, True, ""] +
                                     (["passed"] if key == "outcome" else [])))
        if key == "name" and value == "":
            value = {"t": 1}
        return choice, {**results, "verdict": {**VERDICT, key: value}}, f"verdict.{key}"
    key = draw(st.sampled_from(["name", "outcome"]))
    value = draw(st.sampled_from([{"t": 1}, [1], 5] + (["weird"] if key == "outcome" else [])))
    criterion = {**VERDICT["criteria"][0], key: value}
    return choice, {**results, "verdict": {**VERDICT, "criteria": [criterion]}}, f"verdict.criteria[0].{key}"


@SETTINGS
@given(data=st.data())
def test_evidence_results_json_refuses_malformed_envelopes(data):
    folder, results, _ = _run_folder()
    kind, mutated, field = data.draw(bad_envelope(results))
    (folder / "results.json").write_text(json.dumps(mutated))
    refused("run folder (results.json)", kind, ["gate", "all", "--evidence", str(folder)],
            folder / "results.json", field)


@SETTINGS
@given(data=st.data())
def test_evidence_results_json_refuses_damaged_files(data):
    folder, results, _ = _run_folder()
    text = json.dumps(results, indent=2)
    choice = data.draw(st.sampled_from(["damaged", "NaN", "top level"]))
    if choice == "NaN":
        raw, kind = text.replace('"exit_code": 0', '"exit_code": NaN').replace(
            '"switch_time_s": 90.0', '"switch_time_s": Infinity').encode(), "NaN/inf"
    elif choice == "top level":
        raw, kind = data.draw(st.sampled_from([b"[]", b'"x"', b"3", b"null", b"[{}]"])), "not an object"
    else:
        kind, raw = data.draw(damaged_bytes(text))
    (folder / "results.json").write_bytes(raw)
    refused("run folder (results.json)", kind, ["gate", "all", "--evidence", str(folder)],
            folder / "results.json", allow_ok=kind == "truncated" and raw.strip().endswith(b"}"))


@SETTINGS
@given(data=st.data())
def test_evidence_commands_jsonl_refuses_malformed_records(data):
    folder, _, commands = _run_folder()
    record_ = dict(commands[0])
    kind = data.draw(st.sampled_from(["field", "not JSON", "not an object"]))
    if kind == "field":
        key = data.draw(st.sampled_from(["argv", "seconds", "exit_code", "timed_out", "env", "started"]))
        value = data.draw(st.sampled_from({"argv": ["fio --version", [1], {"t": 1}], "seconds": [-1, "fast", [1]],
                                           "exit_code": ["0", 1.5, {"t": 1}], "timed_out": ["no", 0, [1]],
                                           "env": [["LANG"], "LANG=C", {"LANG": 1}],
                                           "started": [5, {"t": 1}, [1]]}[key]))
        line, field = json.dumps({**record_, key: value}), key
    elif kind == "not JSON":
        line, field = json.dumps(record_)[:data.draw(st.integers(1, 40))], None
    else:
        line, field = data.draw(st.sampled_from(["[1, 2]", '"fio"', "7"])), None
    (folder / "commands.jsonl").write_text(json.dumps(record_) + "\n" + line + "\n")
    out = Path(tempfile.mkdtemp(dir=WORK)) / "report"
    refused("run folder (commands.jsonl)", kind, ["report", "build", str(folder), "--out", str(out)],
            folder / "commands.jsonl", field)


# --------------------------------------------------------------------------- numeric options and --set
OPTIONS = [
    # (command line before the option, option, kind of number)
    (["cost", "--node-price", "1", "--array-price", "1"], "--nodes", "count"),
    (["cost", "--nodes", "8", "--array-price", "1"], "--node-price", "positive"),
    (["cost", "--nodes", "8", "--node-price", "1", "--array-price", "1"], "--max-share", "percent"),
    (["model-switch"], "--switches", "non-negative"),
    (["model-switch", "--switches", "20"], "--utilization", "percent"),
    (["selftest"], "--expect-drives", "count"),
    (["selftest"], "--min-spare", "percent"),
    (["run", "qwen25-32b-cold-restore", "--target", str(WORK), "--dry-run"], "--ceiling", "positive"),
    (["run", "qwen25-32b-cold-restore", "--target", str(WORK), "--dry-run"], "--runtime", "positive"),
    (["run", "qwen25-32b-cold-restore", "--target", str(WORK), "--dry-run"], "--repeats", "count"),
    (["run", "qwen25-32b-cold-restore", "--target", str(WORK), "--dry-run"], "--scale", "fraction"),
    (["line-efficiency", "--peer", "127.0.0.1"], "--threshold", "fraction"),
    (["line-efficiency", "--peer", "127.0.0.1"], "--duration", "count"),
    (["soak", "small-file-dataset", "--duration", "10s", "--target", str(WORK)], "--stall", "positive"),
    (["pattern", "capture", "--device", "/dev/null"], "--seconds", "positive"),
]
BAD_NUMBERS = {
    "count": ["0", "-1", "2.5", "abc", "nan", "inf", "", "1e3x", "0x10"],
    "positive": ["0", "-5", "-0.001", "nan", "inf", "-inf", "abc", "", "1,5"],
    "non-negative": ["-1", "-0.5", "nan", "inf", "abc", ""],
    "percent": ["-1", "100.5", "1000", "nan", "inf", "abc"],
    "fraction": ["0", "-0.1", "1.5", "83", "nan", "inf", "abc"],     # a threshold or scale of 0 means nothing
}


@SETTINGS
@given(case=st.sampled_from(OPTIONS), data=st.data())
def test_numeric_options_refuse_impossible_values(case, data):
    before, option, kind = case
    value = data.draw(st.sampled_from(BAD_NUMBERS[kind]))
    code, text = cli(*before, option, value)
    record("numeric option", kind, code)
    assert code == 2 and text.count("\n") == 1 and option in text and "internal error" not in text, text


SET_BAD = {"threads": ["0", "-1", "2.5", "abc", "nan"], "iodepth": ["0", "abc", "1.5", "-8"],
           "concurrency": ["0", "-2", "x"], "chunk_tokens": ["0", "256.5"], "zipf_theta": ["nan", "-1", "0", "abc"],
           "odirect": ["maybe", "2", ""], "backend": ["nfs", "", "BLOCK"], "cache": ["hot", ""],
           "block_size": ["-4k", "abc", "0", "4q"], "file_count": ["0", "-3"], "nosuchkey": ["1"]}


@SETTINGS
@given(key=st.sampled_from(sorted(SET_BAD)), data=st.data())
def test_set_overrides_refuse_impossible_values(key, data):
    value = data.draw(st.sampled_from(SET_BAD[key]))
    code, text = cli("run", "qwen25-32b-cold-restore", "--target", str(WORK), "--dry-run", "--set", f"{key}={value}")
    record("--set override", key, code)
    assert code == 2 and text.count("\n") == 1 and f"--set {key}=" in text and "internal error" not in text, text
