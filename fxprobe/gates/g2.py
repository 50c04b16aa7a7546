"""G2 single-node baseline: measured inference benchmarks vs the reference report's figures.

The reference is a table with one row per concurrency level, e.g. the ``[[rows]]`` of
``examples/claims/reference-r2.toml``; two columns name the reference TTFT p50 (s) and
throughput. Each measured benchmark (any format :mod:`fxprobe.workload.benchmarks` reads) is matched
to the row of its concurrency and becomes two entries of ``baseline_comparison``::

    {"c8 TTFT p50": {"measured": 7.9, "reference": 7.53, "unit": "s", "file": ...}, ...}

which the G2 gate judges (|measured / reference - 1| x 100 <= g2.baseline_tolerance_pct).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from fxprobe.workload.benchmarks import BenchmarkResult
from fxprobe.core.errors import BadInput
from fxprobe.core.schema import load_toml_model
from fxprobe.gates.claims import TableFile
from fxprobe.gates.catalog import G2
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Evidence, RunRecord
from fxprobe.gates.g3 import keep_copies
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Criterion, Outcome, Verdict


@dataclass(frozen=True)
class Reference:
    source: str
    key: str
    rows: dict[int, dict]
    ttft_column: str
    throughput_column: str


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
    return Reference(str(path), key, rows, ttft_column, throughput_column)


def baseline_comparison(measured: list[BenchmarkResult], reference: Reference) -> tuple[dict, list[str]]:
    """Entries for the G2 gate, and the reasons some measured results could not be compared."""
    table, problems = {}, []
    for result in measured:
        row = reference.rows.get(result.concurrency) if result.concurrency is not None else None
        if row is None:
            problems.append(f"{result.source}: no reference row for concurrency {result.concurrency} "
                            f"(reference levels: {', '.join(map(str, sorted(reference.rows)))})")
            continue
        label = f"c{result.concurrency}"
        if "p50" in result.ttft_s and reference.ttft_column in row:
            table[f"{label} TTFT p50"] = {"measured": result.ttft_s["p50"], "reference": row[reference.ttft_column],
                                          "unit": "s", "file": result.source}
        else:
            problems.append(f"{result.source}: no TTFT p50 to compare with {reference.ttft_column}")
        if result.throughput is not None and reference.throughput_column in row:
            table[f"{label} throughput"] = {"measured": result.throughput,
                                            "reference": row[reference.throughput_column],
                                            "unit": result.throughput_unit, "file": result.source}
        else:
            problems.append(f"{result.source}: no throughput to compare with {reference.throughput_column}")
    return table, problems


def evaluate_g2(run: RunDir, loaded: list[tuple[Path, BenchmarkResult]], reference: Reference | None,
                evidence: Evidence, config: GateConfig) -> tuple[Verdict, dict]:
    """``gate g2``: with a reference, compare the measured files (copied into ``run``) first; then judge G2.

    This run's own comparison replaces any earlier ``baseline_comparison`` among the evidence.
    """
    extra: dict = {}
    problems: list[str] = []
    if reference is not None:
        kept = keep_copies(run, "measured", loaded)
        run.write_raw("reference.toml", Path(reference.source).read_bytes())
        table, problems = baseline_comparison(kept, reference)
        extra = {"baseline_comparison": table, "g2": {"reference": reference.source, "problems": problems,
                                                      "measured": [r.to_dict() for r in kept]}}
        own = RunRecord(run.path, {"command": "gate g2", "outcome": "pass", **extra})
        evidence = evidence.with_runs((own,) + tuple(r for r in evidence.runs
                                                     if "baseline_comparison" not in r.results))
    verdict = G2.evaluate(evidence, config)
    if problems:
        unmatched = tuple(Criterion("baseline comparison", Outcome.NOT_RUN, detail=p) for p in problems)
        verdict = Verdict(verdict.name, verdict.criteria + unmatched, verdict.reason)
    return verdict, extra
