"""G2 single-node baseline: measured inference benchmarks vs the reference report's figures.

The reference is a table with one row per concurrency level, e.g. the ``[[rows]]`` of
``examples/claims/reference-r2.toml``; two columns name the reference TTFT p50 (s) and
throughput. Each measured benchmark (any format :mod:`fxprobe.workload.benchmarks` reads) is matched
to the row of its concurrency and becomes two entries of ``baseline_comparison``::

    {"c8 TTFT p50": {"measured": 7.9, "reference": 7.53, "unit": "s", "file": ..., "reference_file": ...,
                     "column": "array_ttft_s", "model": ...}, ...}

which the G2 gate judges (|measured / reference - 1| x 100 <= g2.baseline_tolerance_pct), printing the reference
file and column beside each. Only the array's columns (``array_*``) are compared with; a result of another model
than the reference's ``[report] model``, or a figure in another unit than its column's (``[report.units]``), is
not compared (NOT RUN, naming both); every reference level must be measured (one missing: NOT RUN).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxprobe.workload.benchmarks import BenchmarkResult
from fxprobe.core.errors import BadInput
from fxprobe.core.schema import load_toml_model
from fxprobe.gates.claims import TableFile
from fxprobe.gates.catalog import ARRAY_PREFIX, G2
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Evidence, RunRecord
from fxprobe.gates.g3 import keep_copies
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Verdict, format_number


@dataclass(frozen=True)
class Reference:
    source: str
    key: str
    rows: dict[int, dict]
    ttft_column: str
    throughput_column: str
    model: str | None = None
    units: dict[str, str] | None = None

    def unit(self, column: str) -> str | None:
        return (self.units or {}).get(column)

    def where(self, column: str, level: int) -> str:
        """How a criterion names the figure it was compared with: file, column, row."""
        return f"{self.source} {column} at {self.key} {level}"


def _array_column(path: Path, option: str, column: str, row_columns: set[str]) -> None:
    """G2 reproduces the ARRAY's figures: a column of another system (local_ttft_s: one local NVMe drive) is refused."""
    if not column.startswith(ARRAY_PREFIX):
        ours = ", ".join(sorted(c for c in row_columns if c.startswith(ARRAY_PREFIX))) or "none"
        raise BadInput(f"{option} {column}: G2 compares the measured array with the reference's figures for the array "
                       f"(columns {ARRAY_PREFIX}*), not {column}; the array's columns in {path}: {ours}")


def load_reference(path: Path, ttft_column: str, throughput_column: str) -> Reference:
    data = load_toml_model(path, TableFile, "reference file")
    key = data.report.key if "key" in data.report.model_fields_set else "concurrency"
    rows = {}
    for index, row in enumerate(data.rows):
        if not isinstance(row.get(key), int) or row[key] < 1:
            raise BadInput(f"{path}: field 'rows[{index}].{key}': must be a whole concurrency level >= 1 "
                           f"(got {row.get(key)!r})")
        for column in (ttft_column, throughput_column):
            if column in row and row[column] <= 0:
                raise BadInput(f"{path}: field 'rows[{index}].{column}': must be > 0 (got {row[column]!r})",
                               hint="a reference TTFT or throughput of zero or less cannot be compared with")
        rows[row[key]] = row
    if not rows:
        raise BadInput(f"{path}: no [[rows]] with reference figures")
    for column in (ttft_column, throughput_column):
        if not any(column in row for row in rows.values()):
            raise BadInput(f"{path}: no row has column {column!r}", hint="choose it with --ttft-column/--throughput-column")
    columns = {c for row in rows.values() for c in row}
    _array_column(path, "--ttft-column", ttft_column, columns)
    _array_column(path, "--throughput-column", throughput_column, columns)
    return Reference(str(path), key, rows, ttft_column, throughput_column, data.report.model, dict(data.report.units))


def _not_comparable(result: BenchmarkResult, reference: Reference) -> str | None:
    """Why a measured result cannot be compared with the reference at all: another (or an unknown) model."""
    if reference.model is None or not result.model or result.model != reference.model:
        return (f"{result.source}: model {result.model or 'not recorded'} vs the reference's "
                f"{reference.model or 'not recorded ([report] model)'} in {reference.source}: not the same model")
    return None


def _entry(label: str, measured: float, unit: str, column: str, reference: Reference, level: int,
           result: BenchmarkResult) -> tuple[str, dict]:
    return label, {"measured": measured, "reference": reference.rows[level][column], "unit": unit,
                   "file": result.source, "reference_file": reference.source, "column": column,
                   "row": f"{reference.key} {level}", "model": result.model}


def _compare_one(result: BenchmarkResult, reference: Reference) -> tuple[dict, list[str]]:
    """One measured result against its row: TTFT p50 (s) and throughput, each only in the reference column's unit."""
    level = result.concurrency
    row, table, problems = reference.rows[level], {}, []
    ttft, tput = reference.ttft_column, reference.throughput_column
    if "p50" in result.ttft_s and ttft in row and reference.unit(ttft) == "s":
        table.update([_entry(f"c{level} TTFT p50", result.ttft_s["p50"], "s", ttft, reference, level, result)])
    elif "p50" not in result.ttft_s or ttft not in row:
        problems.append(f"{result.source}: no TTFT p50 to compare with {reference.where(ttft, level)}")
    else:
        problems.append(f"{result.source}: TTFT p50 in s vs {reference.where(ttft, level)} in "
                        f"{reference.unit(ttft) or 'no unit ([report.units])'}: not the same unit")
    if result.throughput is not None and tput in row and reference.unit(tput) == result.throughput_unit:
        table.update([_entry(f"c{level} throughput", result.throughput, result.throughput_unit, tput, reference,
                             level, result)])
    elif result.throughput is None or tput not in row:
        problems.append(f"{result.source}: no throughput to compare with {reference.where(tput, level)}")
    else:
        problems.append(f"{result.source}: throughput {format_number(result.throughput)} {result.throughput_unit} vs "
                        f"{reference.where(tput, level)} in {reference.unit(tput) or 'no unit ([report.units])'}: "
                        "not the same unit")
    return table, problems


def baseline_comparison(measured: list[BenchmarkResult], reference: Reference) -> tuple[dict, list[str]]:
    """Entries for the G2 gate, and the reasons some measured results (or reference levels) could not be compared."""
    table, problems = {}, []
    for result in measured:
        row = reference.rows.get(result.concurrency) if result.concurrency is not None else None
        if row is None:
            problems.append(f"{result.source}: no reference row for concurrency {result.concurrency} "
                            f"(reference levels: {', '.join(map(str, sorted(reference.rows)))})")
            continue
        other = _not_comparable(result, reference)
        if other:
            problems.append(other)
            continue
        entries, missing = _compare_one(result, reference)
        table.update(entries)
        problems += missing
    measured_levels = {r.concurrency for r in measured}
    problems += [f"no measured result at concurrency {level}, a level of the reference {reference.source} (every "
                 "level is compared)" for level in sorted(reference.rows) if level not in measured_levels]
    return table, problems


def evaluate_g2(run: RunDir, loaded: list[tuple[Path, BenchmarkResult]], reference: Reference | None,
                evidence: Evidence, config: GateConfig) -> tuple[Verdict, dict]:
    """``gate g2``: with a reference, compare the measured files (copied into ``run``) first; then judge G2.

    This run's own comparison replaces any earlier ``baseline_comparison`` among the evidence; the problems it
    records (a result or a reference level not compared) are NOT RUN criteria, here and whenever it is re-judged.
    """
    extra: dict = {}
    if reference is not None:
        kept = keep_copies(run, "measured", loaded)
        run.write_raw("reference.toml", Path(reference.source).read_bytes())
        table, problems = baseline_comparison(kept, reference)
        extra = {"baseline_comparison": table, "g2": {
            "reference": reference.source, "ttft_column": reference.ttft_column,
            "throughput_column": reference.throughput_column, "model": reference.model, "problems": problems,
            "measured": [r.to_dict() for r in kept]}}
        own = RunRecord(run.path, {"command": "gate g2", "outcome": "pass", **extra})
        evidence = evidence.with_runs((own,) + tuple(r for r in evidence.runs
                                                     if "baseline_comparison" not in r.results))
    return G2.evaluate(evidence, config), extra
