"""G3 main joint test: KV tiering (candidate) vs one local NVMe drive (baseline).

Per concurrency level, from two benchmark results:

* TTFT reduction  = (baseline TTFT - candidate TTFT) / baseline TTFT x 100, at p50 and at
  p90/p99 when both files have them (a long_doc_qa summary has only the mean; it is
  labelled "mean" and never passed off as p50); pass if >= ``g3.ttft_reduction_min_pct``.
* Throughput gain = (candidate / baseline - 1) x 100, same unit on both sides; pass if
  inside [``g3.throughput_gain_min_pct``, ``g3.throughput_gain_max_pct``] (two criteria,
  each with its own margin; +28.9 % fails a band starting at 29 %).

Candidates and baselines are paired by concurrency (vllm ``max_concurrency``, the number of
users in a multi_round_qa CSV); a result that records no level pairs with nothing. A pair is compared only when
both record the model and the level and they agree, and their input tokens and completed requests agree within
5 % (printed). Two results at one level on one side are refused (pass one per level). A candidate without a
baseline (or the reverse), and every level of ``g3.concurrency_levels`` no pair covers, is a "not run" criterion.

The multi-node part (8 nodes sharing one array, read-back against the NIC ceiling of the gates config) is
:mod:`fxprobe.gates.readback`.
"""

from __future__ import annotations

import hashlib
import shutil
from fractions import Fraction
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from fxprobe.core.data import AsDict
from fxprobe.workload import witness
from fxprobe.workload.benchmarks import BenchmarkResult, benchmark_files, load_benchmark
from fxprobe.core.errors import BadInput
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Evidence, Gate, Judge, Requirement, RunRecord, errored
from fxprobe.gates.measured_array import array_judge
from fxprobe.gates.readback import CEILING, MULTI_NODE, NODES, ceiling_criteria, nodes_criteria
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Criterion, Outcome, Verdict, deciding_places, exact, format_fixed, format_number

TTFT_KEYS = ("p50", "p90", "p99")

BENCHMARKS = Requirement("G3 benchmark comparison", "fxprobe gate g3 --candidate FILE --baseline FILE",
                         commands=("gate g3",), has_field="g3.comparisons")


@dataclass(frozen=True)
class Comparison:
    """One metric of a candidate against its baseline."""

    label: str            # "c8" or the file stem
    metric: str           # "TTFT p50", "throughput"
    kind: str             # "ttft" or "throughput"
    candidate: float
    baseline: float
    unit: str
    candidate_file: str
    baseline_file: str
    note: str = ""

    @property
    def change(self) -> Fraction:
        """The change in percent, exact from the recorded figures (10.04 s -> 7.53 s is 25 %, not 24.999...)."""
        candidate, baseline = exact(self.candidate), exact(self.baseline)
        if self.kind == "ttft":
            return (baseline - candidate) / baseline * 100
        return (candidate / baseline - 1) * 100

    @property
    def change_pct(self) -> float:
        return float(self.change)

    def to_dict(self) -> dict:
        return {**asdict(self), "change_pct": self.change_pct}

    @classmethod
    def from_dict(cls, data: dict) -> "Comparison":
        fields = ("label", "metric", "kind", "candidate", "baseline", "unit", "candidate_file", "baseline_file")
        return cls(**{key: data[key] for key in fields}, note=str(data.get("note", "")))


@dataclass(frozen=True)
class Unpaired(AsDict):
    label: str
    reason: str


def _label(result: BenchmarkResult) -> str:
    return f"c{result.concurrency}" if result.concurrency is not None else Path(result.source).stem


def one_per_level(results: list[BenchmarkResult], side: str, command: str = "gate g3") -> None:
    """Two results at one concurrency level on one side: BadInput naming both (the second would replace the first)."""
    seen: dict[int, str] = {}
    for result in results:
        if result.concurrency is None:
            continue
        if result.concurrency in seen:
            raise BadInput(f"{command}: two {side} results at concurrency {result.concurrency} "
                           f"({seen[result.concurrency]}, {result.source})", hint="pass one result per level")
        seen[result.concurrency] = result.source


def pair_results(candidates: list[BenchmarkResult], baselines: list[BenchmarkResult]
                 ) -> tuple[list[tuple[BenchmarkResult, BenchmarkResult]], list[Unpaired]]:
    """Pair by concurrency; a result that records no concurrency level pairs with nothing (NOT RUN, named)."""
    one_per_level(candidates, "candidate")
    one_per_level(baselines, "baseline")
    base_at = {b.concurrency: b for b in baselines if b.concurrency is not None}
    cand_levels = {c.concurrency for c in candidates if c.concurrency is not None}
    pairs, unpaired = [], []
    for cand in candidates:
        if cand.concurrency in base_at:
            pairs.append((cand, base_at[cand.concurrency]))
        elif cand.concurrency is not None:
            unpaired.append(Unpaired(_label(cand), f"no baseline at concurrency {cand.concurrency} for {cand.source}"))
    for base in baselines:
        if base.concurrency is not None and base.concurrency not in cand_levels:
            unpaired.append(Unpaired(_label(base), f"no candidate at concurrency {base.concurrency} for {base.source}"))
    for result in candidates + baselines:
        if result.concurrency is None:
            unpaired.append(Unpaired(_label(result), f"{result.source} records no concurrency level (vllm "
                                     "max_concurrency, multi_round_qa users): it cannot be shown to be the same "
                                     "workload as any other result, so it is compared with none"))
    return pairs, unpaired


WORKLOAD_TOLERANCE_PCT = 5      # input tokens and completed requests of a candidate and its baseline may differ by


def _within(what: str, a: int | None, b: int | None, candidate: BenchmarkResult, baseline: BenchmarkResult
            ) -> tuple[str | None, str]:
    """(why not the same workload, or None; the figure printed beside the criteria)."""
    if a is None and b is None:
        return None, f"{what} recorded in neither file"
    if a is None or b is None:
        return (f"{what} recorded in {candidate.source if b is None else baseline.source} only "
                f"({a if b is None else b}): the same workload cannot be shown"), ""
    differ = Fraction(abs(a - b) * 100, max(a, b)) if max(a, b) else Fraction(0)
    shown = format_fixed(differ, deciding_places(differ, "<=", WORKLOAD_TOLERANCE_PCT, "%"), "%")
    text = f"{what} {a:,} vs {b:,}: {shown} apart (tolerance {WORKLOAD_TOLERANCE_PCT} %)"
    return (text if differ > WORKLOAD_TOLERANCE_PCT else None), text


def same_workload(candidate: BenchmarkResult, baseline: BenchmarkResult) -> tuple[str | None, str]:
    """(why the two are not the same workload - model, concurrency, input tokens, requests - or None; what was
    checked, printed beside each criterion)."""
    for what, a, b in (("model", candidate.model, baseline.model),
                       ("concurrency", candidate.concurrency, baseline.concurrency)):
        if a is None or b is None or a == "":
            return (f"not comparable: {what} unknown in {candidate.source if a in (None, '') else baseline.source} "
                    f"(candidate {a or '?'}, baseline {b or '?'})"), ""
        if a != b:
            return f"not comparable: {what} {a} in {candidate.source} vs {b} in {baseline.source}", ""
    checked = [f"model {candidate.model} at concurrency {candidate.concurrency}"]
    for what, a, b in (("input tokens", candidate.input_tokens, baseline.input_tokens),
                       ("completed requests", candidate.completed, baseline.completed)):
        problem, text = _within(what, a, b, candidate, baseline)
        if problem:
            return f"not the same workload: {problem}", ""
        checked.append(text)
    return None, "; ".join(checked)


def compare(candidate: BenchmarkResult, baseline: BenchmarkResult) -> tuple[list[Comparison], list[Unpaired]]:
    label = _label(candidate)
    out: list[Comparison] = []
    missing: list[Unpaired] = []
    problem, note = same_workload(candidate, baseline)
    if problem:
        return [], [Unpaired(label, problem)]
    keys = [k for k in TTFT_KEYS if k in candidate.ttft_s and k in baseline.ttft_s]
    if not keys and "mean" in candidate.ttft_s and "mean" in baseline.ttft_s:
        keys = ["mean"]
    if not keys:
        missing.append(Unpaired(label, f"no TTFT statistic present in both {candidate.source} "
                                f"({', '.join(candidate.ttft_s) or 'none'}) and {baseline.source} "
                                f"({', '.join(baseline.ttft_s) or 'none'})"))
    for key in keys:
        if baseline.ttft_s[key] <= 0:
            missing.append(Unpaired(label, f"{baseline.source}: TTFT {key} is {baseline.ttft_s[key]}"))
            continue
        out.append(Comparison(label, f"TTFT {key}", "ttft", candidate.ttft_s[key], baseline.ttft_s[key],
                              "s", candidate.source, baseline.source, note))
    if candidate.throughput is None or baseline.throughput is None:
        which = candidate.source if candidate.throughput is None else baseline.source
        missing.append(Unpaired(label, f"{which} has no throughput figure"))
    elif candidate.throughput_unit != baseline.throughput_unit:
        missing.append(Unpaired(label, f"throughput units differ: {candidate.throughput_unit} in "
                                f"{candidate.source} vs {baseline.throughput_unit} in {baseline.source}"))
    elif baseline.throughput <= 0:
        missing.append(Unpaired(label, f"{baseline.source}: throughput is {baseline.throughput}"))
    else:
        out.append(Comparison(label, "throughput", "throughput", candidate.throughput, baseline.throughput,
                              candidate.throughput_unit, candidate.source, baseline.source, note))
    return out, missing


def comparisons_for(candidates: list[BenchmarkResult], baselines: list[BenchmarkResult]
                    ) -> tuple[list[Comparison], list[Unpaired]]:
    pairs, unpaired = pair_results(candidates, baselines)
    comparisons: list[Comparison] = []
    for cand, base in sorted(pairs, key=lambda p: (p[0].concurrency is None, p[0].concurrency or 0)):
        found, missing = compare(cand, base)
        comparisons += found
        unpaired += missing
    return comparisons, unpaired


def _detail(c: Comparison) -> str:
    text = f"candidate {format_number(c.candidate, c.unit)} vs baseline {format_number(c.baseline, c.unit)}"
    return f"{text}; {c.note}" if c.note else text


def criteria_for(comparisons: list[Comparison], unpaired: list[Unpaired], config: GateConfig
                 ) -> list[Criterion]:
    ttft_min = config.get("g3", "ttft_reduction_min_pct")
    low = config.get("g3", "throughput_gain_min_pct")
    high = config.get("g3", "throughput_gain_max_pct")
    criteria = []
    for c in comparisons:
        evidence = f"{c.candidate_file} vs {c.baseline_file}"
        if " differ: " in c.note:           # an older fxprobe compared and warned: the same workload is not shown
            criteria.append(Criterion(f"{c.label} {c.metric} comparison", Outcome.NOT_RUN, detail=
                                      f"not the same workload: {c.note}", evidence=evidence))
            continue
        try:
            c.change
        except (ZeroDivisionError, ValueError) as exc:
            problem = "is 0" if isinstance(exc, ZeroDivisionError) else f"cannot be used ({exc})"
            criteria.append(Criterion(f"{c.label} {c.metric} {'reduction' if c.kind == 'ttft' else 'gain'}",
                                      Outcome.ERROR, detail=f"{c.baseline_file}: the baseline {c.metric} {problem}; "
                                      f"{_detail(c)}", evidence=evidence))
            continue
        if c.kind == "ttft":
            criteria.append(Criterion.compare(f"{c.label} {c.metric} reduction", c.change, ">=", ttft_min,
                                              unit="%", detail=_detail(c), evidence=evidence))
        else:
            criteria.append(Criterion.compare(f"{c.label} throughput gain (band low)", c.change, ">=", low,
                                              unit="%", detail=_detail(c), evidence=evidence))
            criteria.append(Criterion.compare(f"{c.label} throughput gain (band high)", c.change, "<=", high,
                                              unit="%", detail=_detail(c), evidence=evidence))
    for item in unpaired:
        criteria.append(Criterion(f"{item.label} comparison", Outcome.NOT_RUN, detail=item.reason))
    return criteria


def g3_benchmark_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """Benchmark criteria re-derived from ``gate g3`` runs among the evidence (current thresholds)."""
    runs = [run for run in evidence.matching(BENCHMARKS) if run.errored or "g3" in run.results]   # compared something
    if not runs:
        return [BENCHMARKS.absent(BENCHMARK_NAME)]
    criteria, seen = [], set()
    for run in runs:
        if run.errored or not isinstance(run.get("g3.comparisons"), list):
            criteria.append(errored(BENCHMARK_NAME, run) if run.errored else
                            Criterion("G3 benchmark comparison", Outcome.ERROR, detail="g3.comparisons is not a list",
                                      evidence=run.evidence))
            continue
        try:
            comparisons = [Comparison.from_dict(d) for d in run.get("g3.comparisons")]
            unpaired = [Unpaired(**d) for d in run.get("g3.unpaired", []) or []]
        except (KeyError, TypeError) as exc:
            criteria.append(Criterion("G3 benchmark comparison", Outcome.ERROR, detail=
                                      f"g3.comparisons is malformed ({exc})", evidence=run.evidence))
            continue
        if not comparisons and not unpaired:
            criteria.append(Criterion(BENCHMARK_NAME, Outcome.NOT_RUN, detail=f"{run.evidence} compares nothing (no "
                                      "candidate and baseline were given to it): no TTFT or throughput was judged; "
                                      f"run `{BENCHMARKS.produce}`", evidence=run.evidence))
            continue
        comparisons = [replace(c, candidate_file=str(run.path / c.candidate_file),
                               baseline_file=str(run.path / c.baseline_file)) for c in comparisons]
        criteria += criteria_for(comparisons, unpaired, config)
        seen |= {item.label for item in [*comparisons, *unpaired]}
    return criteria + missing_levels(seen, config) if seen else criteria


def missing_levels(seen: set[str], config: GateConfig) -> list[Criterion]:
    """Every required concurrency level (g3.concurrency_levels: the reference R2's 8, 16 and 32) that no comparison
    covers is NOT RUN: leaving out the level that fails does not pass G3."""
    levels = config.values.get("g3", {}).get("concurrency_levels") or []
    where = f"g3.concurrency_levels = {list(levels)} ({config.source})"
    return [Criterion(f"c{level} comparison", Outcome.NOT_RUN, detail=f"no candidate and baseline at concurrency "
                      f"{level}, a required level ({where}); run `{BENCHMARKS.produce}` with one file per level "
                      "on each side") for level in levels if f"c{level}" not in seen]


BENCHMARK_NAME = "TTFT reduction and throughput gain"
MULTI_NODE_CHECKS = (
    Judge(CEILING, ("nic_ceiling_min_pct", "nic_ceiling_gbps", "readback_working_set_min_gib"), ceiling_criteria),
    Judge(NODES, ("nodes_sharing",), nodes_criteria),
)
def file_checks(requirement: Requirement):
    """Information lines of a gate: what each benchmark file its comparisons read was checked against
    (workload.benchmark_checks) and where it came from (workload.witness: witnessed or handed over)."""
    def benchmark_files_checked(evidence: Evidence, config: GateConfig) -> list[str]:
        return [f"{source}: {note} [evidence: {run.evidence}]" for run in evidence.matching(requirement)
                for source, note, _ in witness.file_notes(run.results)]
    return benchmark_files_checked


G3 = Gate("g3", "main joint test", checks=MULTI_NODE_CHECKS, extras=(
    Judge(BENCHMARK_NAME, ("ttft_reduction_min_pct", "throughput_gain_min_pct", "throughput_gain_max_pct"),
          g3_benchmark_criteria), array_judge(MULTI_NODE)),
    notes=(file_checks(BENCHMARKS),))


def load_side(paths: list[Path]) -> list[tuple[Path, BenchmarkResult]]:
    """Every benchmark file behind the given files/run directories, parsed (BadInput names the file)."""
    loaded = []
    for path in paths:
        for file in benchmark_files(path):      # each file says whether a benchmark run witnessed it
            result = load_benchmark(file)
            digest = hashlib.sha256(file.read_bytes()).hexdigest()
            note, program = witness.origin(file, digest)
            loaded.append((file, replace(result, notes=result.notes + (note,), sha256=digest, program=program)))
    return loaded


def keep_copies(run: RunDir, role: str, loaded: list[tuple[Path, BenchmarkResult]]) -> list[BenchmarkResult]:
    """Copy each file into ``raw/<role>/`` of the gate's run; sources become run-relative paths."""
    folder = run.raw / role
    folder.mkdir(parents=True, exist_ok=True)
    kept = []
    for index, (path, result) in enumerate(loaded, start=1):
        target, again = folder / path.name, 0
        while target.exists():          # never overwrite an earlier copy (a/x.json, a/03-x.json, b/x.json)
            again += 1
            target = folder / (f"{index:02d}-{path.name}" if again == 1 else f"{index:02d}-{again}-{path.name}")
        shutil.copyfile(path, target)
        kept.append(replace(result, source=target.relative_to(run.path).as_posix()))
    return kept


def load_pair(candidates: list[Path], baselines: list[Path]
              ) -> tuple[list[tuple[Path, BenchmarkResult]], list[tuple[Path, BenchmarkResult]]]:
    """Parse both sides before anything is written: bad input stops here with one line."""
    if bool(candidates) != bool(baselines):
        missing = "--baseline" if candidates else "--candidate"
        raise BadInput(f"gate g3: {missing} is missing", hint="give both --candidate and --baseline")
    cand, base = load_side(candidates), load_side(baselines)
    one_per_level([r for _, r in cand], "candidate")
    one_per_level([r for _, r in base], "baseline")
    return cand, base


def evaluate_g3(run: RunDir, cand_loaded: list[tuple[Path, BenchmarkResult]],
                base_loaded: list[tuple[Path, BenchmarkResult]], evidence: Evidence,
                config: GateConfig) -> tuple[Verdict, dict]:
    """``gate g3``: compare benchmark files (copied into ``run``) plus any G3 evidence runs, judged by the G3 gate
    (this run's own comparison replaces any earlier one among the evidence, as ``gate g2`` does)."""
    if not cand_loaded:         # nothing compared: no g3 block, so this run never passes for a comparison later
        return G3.evaluate(evidence, config), {}
    cand = keep_copies(run, "candidate", cand_loaded)
    base = keep_copies(run, "baseline", base_loaded)
    comparisons, unpaired = comparisons_for(cand, base)
    results = {"g3": {"candidates": [r.to_dict() for r in cand], "baselines": [r.to_dict() for r in base],
                      "comparisons": [c.to_dict() for c in comparisons],
                      "unpaired": [u.to_dict() for u in unpaired]}}
    own = RunRecord(run.path, {"command": "gate g3", "outcome": "pass", **results})
    evidence = evidence.with_runs((own,) + tuple(r for r in evidence.runs if not BENCHMARKS.matches(r)))
    return G3.evaluate(evidence, config), results
