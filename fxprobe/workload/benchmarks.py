"""Ingest inference benchmark results into one normalized :class:`BenchmarkResult`.

Accepted inputs (see ``docs/benchmark-inputs.md``):

* ``vllm bench serve --save-result`` JSON: ``median_ttft_ms``/``p{N}_ttft_ms`` (ms),
  ``output_throughput``/``total_token_throughput`` (tok/s), ``request_throughput``,
  ``max_concurrency``, ``completed``, ``failed``.
* LMCache ``benchmarks/long_doc_qa`` ``--json-output`` line: ``query_ttft_per_prompt``
  (mean TTFT of the query round, s) and ``query_round_time_per_prompt`` (query round
  duration / prompts, s), giving a request rate ``1 / query_round_time_per_prompt``.
* LMCache long_doc_qa CSV ``prompt_id,request_start,ttft,request_end,successful,...``:
  TTFT percentiles over successful rows; request rate = successful rows / round span.
* LMCache ``benchmarks/multi_round_qa`` ``summary.csv``: TTFT percentiles; output token
  rate = sum(generation_tokens) / (max(finish_time) - min(launch_time)).

TTFT is normalized to seconds. Percentiles over per-request samples use linear
interpolation (numpy's default). A file that is not one of these shapes raises
:class:`~fxprobe.core.errors.BadInput` naming the file and the field.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Annotated, Any

import numpy
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from fxprobe.core.errors import BadInput
from fxprobe.core.schema import validate
from fxprobe.workload import benchmark_checks

FORMAT_VLLM = "vllm-bench-serve"
FORMAT_LONG_DOC_JSON = "lmcache-long-doc-qa-json"
FORMAT_LONG_DOC_CSV = "lmcache-long-doc-qa-csv"
FORMAT_MULTI_ROUND_CSV = "lmcache-multi-round-qa-csv"

LONG_DOC_CSV_COLUMNS = {"prompt_id", "request_start", "ttft", "request_end"}
MULTI_ROUND_CSV_COLUMNS = {"prompt_tokens", "generation_tokens", "ttft", "launch_time", "finish_time"}
PERCENTILES = (50, 90, 99)
LINE = "\0line"      # the CSV line number kept with each row (a key no header can hold)


@dataclass(frozen=True)
class BenchmarkResult:
    """One benchmark run, normalized. TTFT in seconds; throughput in ``throughput_unit``."""

    source: str
    format: str
    concurrency: int | None
    ttft_s: dict[str, float] = field(default_factory=dict)   # keys "p50", "p90", "p99", "mean"
    throughput: float | None = None
    throughput_unit: str = ""       # "output tok/s" or "req/s"
    completed: int | None = None
    failed: int | None = None
    notes: tuple[str, ...] = ()
    model: str | None = None
    input_tokens: int | None = None
    sha256: str | None = None       # of the file as read (a gate sets it: the buyer admits handed-over files by it)
    program: dict | None = None     # the program that wrote it, as the benchmark run that witnessed it traced it

    def to_dict(self) -> dict:
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data


def _bad(source: str, field_name: str, problem: str, hint: str | None = None) -> BadInput:
    return BadInput(f"{source}: field {field_name!r}: {problem}",
                    hint=hint or "pass a vllm bench serve --save-result JSON, an LMCache long_doc_qa "
                                 "JSON/CSV or a multi_round_qa summary CSV")


def _number(source: str, data: dict, key: str, *, required: bool = False, positive: bool = False) -> float | None:
    """A finite number from ``data[key]`` (> 0 with ``positive``); numbers written as strings are accepted."""
    if key not in data or data[key] is None or data[key] == "":
        if required:
            raise _bad(source, key, "missing")
        return None
    value = data[key]
    if isinstance(value, bool):
        raise _bad(source, key, f"expected a number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _bad(source, key, f"expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise _bad(source, key, f"expected a finite number, got {value!r}")
    if positive and number <= 0:
        raise _bad(source, key, f"must be > 0, got {value!r}")
    return number


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50/p90/p99 and mean of per-request samples (linear interpolation)."""
    if not samples:
        return {}
    values = numpy.asarray(samples, dtype=float)
    out = {f"p{p}": float(numpy.percentile(values, p)) for p in PERCENTILES}
    out["mean"] = float(values.mean())
    return out


# -- vllm bench serve -------------------------------------------------------------
def _loose_number(value: Any) -> Any:
    """vLLM writes numbers; other tools (and hand-edited files) write "123.4": both read, true/false do not."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number, got {value!r}")
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            raise ValueError(f"expected a number, got {value!r}") from None
    return value


def _loose_count(value: Any) -> Any:
    value = _loose_number(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


Milliseconds = Annotated[float, Field(gt=0, allow_inf_nan=False), BeforeValidator(_loose_number)] | None
Rate = Annotated[float, Field(gt=0, allow_inf_nan=False), BeforeValidator(_loose_number)] | None
Requests = Annotated[int, Field(ge=0), BeforeValidator(_loose_count)] | None


class VllmBenchServe(BaseModel):
    """The fields fxprobe reads from ``vllm bench serve --save-result`` JSON (other keys are vLLM's own and
    ignored). TTFT and throughput must be > 0, counts whole; ``completed`` 0 or any ``failed`` request is
    refused by name (a benchmark that measured nothing, or whose figures leave failures out, is no evidence)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False, frozen=True)

    completed: Requests = None
    failed: Requests = None
    max_concurrency: Annotated[int, Field(ge=1), BeforeValidator(_loose_count)] | None = None
    median_ttft_ms: Milliseconds = None
    p50_ttft_ms: Milliseconds = None
    p90_ttft_ms: Milliseconds = None
    p99_ttft_ms: Milliseconds = None
    mean_ttft_ms: Milliseconds = None
    output_throughput: Rate = None
    request_throughput: Rate = None
    total_input_tokens: Requests = None
    model_id: str | None = None
    ttfts: list[Annotated[float, Field(gt=0, allow_inf_nan=False)]] | None = None

    @field_validator("completed")
    @classmethod
    def _measured_something(cls, completed: int | None) -> int | None:
        if completed == 0:
            raise ValueError("0 requests completed: the benchmark measured nothing")
        return completed

    @field_validator("failed")
    @classmethod
    def _no_failures(cls, failed: int | None) -> int | None:
        if failed:
            raise ValueError(f"{failed} requests failed: TTFT and throughput leave them out; rerun until "
                             "every request completes")
        return failed


def parse_vllm_bench(data: dict, source: str) -> BenchmarkResult:
    """``vllm bench serve --save-result`` JSON (ms latencies) -> BenchmarkResult."""
    bench = validate(VllmBenchServe, data, source)
    problems, checked = benchmark_checks.self_check(data)
    if problems:
        raise BadInput(f"{source}: {'; '.join(problems)}: these are not the figures vLLM writes from the file's own "
                       "counts (edited, rounded or taken from another run)",
                       hint="pass the file vllm bench serve --save-result wrote, unedited")
    ttft: dict[str, float] = {}
    p50 = bench.p50_ttft_ms if bench.p50_ttft_ms is not None else bench.median_ttft_ms
    for key, value in (("p50", p50), ("p90", bench.p90_ttft_ms), ("p99", bench.p99_ttft_ms),
                       ("mean", bench.mean_ttft_ms)):
        if value is not None:
            ttft[key] = value / 1000.0
    notes = [checked]
    if bench.ttfts:
        added = {k: v for k, v in percentiles(bench.ttfts).items() if k not in ttft}
        ttft.update(added)
        if added:
            notes.append(f"TTFT {', '.join(added)} from {len(bench.ttfts)} per-request ttfts (--save-detailed)")
    if not ttft:
        raise _bad(source, "median_ttft_ms", "missing (no TTFT field: median_ttft_ms, p50_ttft_ms, "
                   "p90_ttft_ms, p99_ttft_ms or mean_ttft_ms)")
    throughput, unit = bench.output_throughput, "output tok/s"
    if throughput is None:
        throughput = bench.request_throughput
        unit = "req/s" if throughput is not None else ""
    return BenchmarkResult(source, FORMAT_VLLM, bench.max_concurrency, ttft, throughput, unit,
                           bench.completed, bench.failed, tuple(notes), bench.model_id, bench.total_input_tokens)


# -- LMCache long_doc_qa -------------------------------------------------------------
def parse_long_doc_json(data: dict, source: str) -> BenchmarkResult:
    """long_doc_qa ``--json-output`` summary: mean TTFT and a request rate."""
    ttft_mean = _number(source, data, "query_ttft_per_prompt", required=True, positive=True)
    round_time = _number(source, data, "query_round_time_per_prompt")
    throughput = None
    if round_time is not None:
        if round_time <= 0:
            raise _bad(source, "query_round_time_per_prompt", f"must be > 0, got {round_time}")
        throughput = 1.0 / round_time
    notes = ("long_doc_qa JSON holds only the mean TTFT (no percentiles)",)
    return BenchmarkResult(source, FORMAT_LONG_DOC_JSON, None, {"mean": ttft_mean}, throughput,
                           "req/s" if throughput is not None else "", None, None, notes)


def _truthy(text: str) -> bool:
    return str(text).strip().lower() in ("true", "1", "yes")


def _csv_rows(text: str, source: str, required: set[str]) -> list[dict]:
    reader = csv.DictReader(io.StringIO(text))
    columns = set(reader.fieldnames or ())
    missing = sorted(required - columns)
    if missing:
        raise _bad(source, missing[0], "missing CSV column")
    rows = [{**row, LINE: index} for index, row in enumerate(reader, start=2)]
    if not rows:
        raise _bad(source, "ttft", "the CSV has a header but no rows")
    return rows


def _column(rows: list[dict], key: str, source: str, *, positive: bool = False) -> list[float]:
    return [_number(f"{source} line {row.get(LINE, index)}", row, key, required=True, positive=positive)
            for index, row in enumerate(rows, start=2)]


def _span(starts: list[float], ends: list[float], source: str, start_key: str, end_key: str) -> float:
    span = max(ends) - min(starts)
    if span <= 0:
        raise _bad(source, end_key, f"the last {end_key} ({max(ends):g}) is not after the first {start_key} "
                   f"({min(starts):g}): no time passed, so no throughput")
    return span


def parse_long_doc_csv(text: str, source: str) -> BenchmarkResult:
    """long_doc_qa per-request CSV (times in s, relative to the round start)."""
    rows = _csv_rows(text, source, LONG_DOC_CSV_COLUMNS)
    total = len(rows)
    if "successful" in rows[0]:
        failed = [row[LINE] for row in rows if not _truthy(row["successful"])]
        if failed:
            raise _bad(source, "successful", f"{len(failed)} of {total} requests failed (line "
                       f"{', '.join(map(str, failed[:5]))}{', ...' if len(failed) > 5 else ''}): TTFT and "
                       "throughput would leave them out; rerun until every request succeeds")
    ttfts = _column(rows, "ttft", source, positive=True)
    starts = _column(rows, "request_start", source)
    ends = _column(rows, "request_end", source)
    throughput = len(rows) / _span(starts, ends, source, "request_start", "request_end")
    notes = []
    if "is_miss" in rows[0]:
        misses = sum(1 for row in rows if _truthy(row["is_miss"]))
        notes.append(f"{misses} of {len(rows)} requests were cache misses")
    return BenchmarkResult(source, FORMAT_LONG_DOC_CSV, None, percentiles(ttfts), throughput,
                           "req/s" if throughput is not None else "", len(rows), total - len(rows),
                           tuple(notes))


def parse_multi_round_csv(text: str, source: str) -> BenchmarkResult:
    """multi_round_qa ``summary.csv``: TTFT percentiles and the output token rate."""
    rows = _csv_rows(text, source, MULTI_ROUND_CSV_COLUMNS)
    ttfts = _column(rows, "ttft", source, positive=True)
    launches = _column(rows, "launch_time", source)
    finishes = _column(rows, "finish_time", source)
    tokens = _column(rows, "generation_tokens", source)
    if min(tokens) < 0:
        raise _bad(source, "generation_tokens", f"must be >= 0, got {min(tokens):g}")
    throughput = sum(tokens) / _span(launches, finishes, source, "launch_time", "finish_time")
    if throughput <= 0:
        raise _bad(source, "generation_tokens", "no tokens were generated: the benchmark measured nothing")
    concurrency = None
    if "user_id" in rows[0]:
        concurrency = len({row["user_id"] for row in rows})
    notes = ("concurrency = number of distinct user_id values",) if concurrency else ()
    prompt_tokens = int(sum(_column(rows, "prompt_tokens", source)))
    return BenchmarkResult(source, FORMAT_MULTI_ROUND_CSV, concurrency, percentiles(ttfts), throughput,
                           "output tok/s" if throughput is not None else "", len(rows), None, notes,
                           None, prompt_tokens)


# -- detection -------------------------------------------------------------------------
def _last_json_object(text: str, source: str) -> dict:
    """The whole text as JSON, or else its last line that is a JSON object (long_doc_qa stdout)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as whole_error:
        for line in reversed(text.splitlines()):
            line = line.strip()
            if line.startswith("{"):
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(data, dict):
                    return data
        raise BadInput(f"{source}: not valid JSON ({whole_error.msg}: line {whole_error.lineno} "
                       f"column {whole_error.colno}; truncated?)",
                       hint="pass the complete file the benchmark wrote") from None
    if not isinstance(data, dict):
        raise _bad(source, "(top level)", f"expected a JSON object, got {type(data).__name__}")
    return data


def _json_line_only(text: str, source: str) -> str:
    for line in reversed(text.splitlines()):
        if line.lstrip().startswith("{"):
            try:
                if isinstance(json.loads(line), dict):
                    return line
            except json.JSONDecodeError:
                continue
    raise _bad(source, "(file)", "holds no complete JSON object line")


def parse_benchmark_text(text: str, source: str) -> BenchmarkResult:
    """Detect the format from the content and parse it."""
    stripped = text.lstrip()
    if not stripped:
        raise _bad(source, "(file)", "empty file")
    if stripped.startswith(("{", "[")):
        data = _last_json_object(text, source)
        if "query_ttft_per_prompt" in data:
            return parse_long_doc_json(data, source)
        if any(key.endswith("_ttft_ms") for key in data) or "max_concurrency" in data \
                or "output_throughput" in data:
            return parse_vllm_bench(data, source)
        raise _bad(source, "median_ttft_ms", "not a known benchmark result: no 'median_ttft_ms'/"
                   "'p99_ttft_ms' (vllm bench serve) nor 'query_ttft_per_prompt' (LMCache long_doc_qa)")
    header = {name.strip() for name in stripped.splitlines()[0].split(",")}
    if "ttft" not in header and any(line.lstrip().startswith("{") for line in stripped.splitlines()):
        return parse_benchmark_text(_json_line_only(stripped, source), source)   # captured stdout
    if MULTI_ROUND_CSV_COLUMNS <= header:
        return parse_multi_round_csv(stripped, source)
    if LONG_DOC_CSV_COLUMNS <= header:
        return parse_long_doc_csv(stripped, source)
    if "ttft" in header:
        missing = sorted((LONG_DOC_CSV_COLUMNS if "prompt_id" in header else MULTI_ROUND_CSV_COLUMNS) - header)
        raise _bad(source, missing[0], "missing CSV column")
    raise _bad(source, "ttft", "not a known benchmark result (neither JSON nor a CSV with a 'ttft' column)")


def load_benchmark(path: Path) -> BenchmarkResult:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BadInput(f"{path}: benchmark file not found") from None
    except IsADirectoryError:
        raise BadInput(f"{path}: is a folder; pass a benchmark file or a run directory") from None
    except UnicodeDecodeError:
        raise _bad(str(path), "(file)", "not text (binary data)") from None
    return parse_benchmark_text(text, str(path))


FXPROBE_OWN_FILES = {"results.json", "manifest.json", "environment.json", "commands.jsonl", "origins.jsonl"}
BENCHMARK_SUFFIXES = (".json", ".csv", ".jsonl", ".txt", ".log")


def benchmark_files(path: Path) -> list[Path]:
    """A benchmark file as given, or every benchmark file in a folder (and its ``raw/``).

    fxprobe's own run-directory files (results.json, manifest.json, ...) are skipped.
    """
    path = Path(path)
    if not path.exists():
        raise BadInput(f"{path}: not found", hint="pass a benchmark file or a run directory holding them")
    if path.is_file():
        return [path]
    found = []
    for folder in (path, path / "raw"):
        if folder.is_dir():
            found += sorted(p for p in folder.iterdir()
                            if p.is_file() and p.name not in FXPROBE_OWN_FILES
                            and p.suffix in BENCHMARK_SUFFIXES)
    if not found:
        raise BadInput(f"{path}: no benchmark files (*.json, *.csv) in this folder or its raw/")
    return found
