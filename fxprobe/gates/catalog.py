"""The four acceptance gates, declared. This is the contract with the evidence producers.

What each gate reads from a run directory's ``results.json`` (dotted field paths):

G1  runs with ``command`` "selftest" (one per array; every one must pass; a fleet run ``--nodes`` stands
    for its sub-runs, one per node, each named by its node):
      ``drives_recognized`` or else the measured value of the selftest verdict's
      "drives recognized" criterion          >= g1.drives_expected (24)
      the run's own ``outcome``             == pass (live, healthy drives: the self-test's own criteria)
      ``sysfs_root`` == "/", and each drive's SMART figures re-judged against [g1] (see :mod:`fxprobe.gates.g1`)
      every name in g1.arrays (or ``gate g1 --arrays``) has one: its fleet node name, else ``node``
G2  a run holding ``baseline_comparison``: ``{metric: {"measured": x, "reference": y, "reference_file": ...,
      "column": "array_..."}}`` (``fxprobe gate g2 --measured FILE... --reference TABLE.toml`` writes one, see gates.g2)
      |measured / reference - 1| x 100      <= g2.baseline_tolerance_pct, per metric, the reference file and column
      printed; a column not the array's (or not recorded) is NOT RUN, and so is each of ``g2.problems`` (a result or
      a reference level not compared: another model or unit, a level without a row or without a result)
    runs with ``command`` "line-efficiency" (or any holding the field):
      ``summary.mean_bps`` (goodput) / (g2.line_rate_gbps x 1e9) x 100 >= g2.line_efficiency_min_pct (83):
      against the GATE's line rate (100 Gb/s), never the port's own speed; and
      ``port_speed_bps`` (the port's reported speed) / 1e9 >= g2.line_rate_gbps
G3  runs of ``gate g3`` (``g3.comparisons``): TTFT reduction and throughput gain per
      concurrency, re-judged with the current thresholds (see :mod:`fxprobe.gates.g3`)
    ``run`` results with ``workload.direction`` "read" and 2+ ``workload.nodes`` (see :mod:`fxprobe.gates.readback`):
      ``workload.concurrent.aggregate_bps`` (what the nodes moved while ALL ran: the common span of their bw-log
      windows; none when they never all ran at once: FAIL) x 8 / g3.nic_ceiling_gbps x 100 >= g3.nic_ceiling_min_pct
      (above 100: ERROR; a run that is not distinct nodes reading a block device direct, full size, a working set
      ``workload.derivation.total_bytes`` >= g3.readback_working_set_min_gib: NOT RUN), and
      the number of distinct ``workload.nodes`` other than this machine >= g3.nodes_sharing
G4  runs with ``command`` "soak" (fxprobe.soak summary): ``duration_s`` / 3600 >= g4.soak_hours_min,
      ``interruptions`` (a count or a list) <= g4.interruptions_max
    runs with ``command`` "fault run" (not ``dry_run``), ``plan.kind`` "drive-pull" and one of
    the link kinds ("link-down", "link-flap", "path-loss", "port-disable"), each judged on its own figures
    against [g4] (see :mod:`fxprobe.gates.g4`; the scenario's own verdict is information):
      ``impact.errors`` <= g4.fault_visible_errors_max, ``impact.longest_stall_s`` <= g4.fault_stall_max_s,
      ``impact.throughput_pct`` >= g4.fault_throughput_min_pct, ``impact.p99_ratio`` <= g4.fault_p99_ratio_max,
      ``load_hung`` null (the load ended by its planned end)
    the soak and the drive-pull / link-cut fault runs, each run's own "data verified (mismatches)" criterion
      (fio verify: bad reads of what was written) re-judged, all together <= g4.data_mismatches_max (0); a run that
      did not verify (opted out, with its printed reason) is not run, one that recorded no such criterion an error
    runs with ``command`` "report verify": ``verification.ok`` and ``signature`` "valid" (every hash, each
      bundled run's own manifest and the Ed25519 signature of the joint-test report checked), AND the signer
      among g4.trusted_signers (none configured: not run, naming the key to set; a key pinned with
      ``--public-key`` at verify time is the verifier's choice, not the buyer's), AND the bundle carries the soak
      and fault runs among the evidence (``verification.runs``: their manifests' SHA-256), else fail
"""

from __future__ import annotations

import re
from dataclasses import replace
from fractions import Fraction
from pathlib import Path

from fxprobe.faults.scenario import LINK_KINDS
from fxprobe.gates import omitted
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import Check, Evidence, Gate, Judge, OutcomeCheck, Requirement, RunRecord, errored, per_run
from fxprobe.gates.g1 import UNITS as G1_UNITS
from fxprobe.gates.g3 import G3, file_checks
from fxprobe.gates.g4 import fault_units, soak_clock
from fxprobe.gates.measured_array import array_judge
from fxprobe.core.kernel import NET_CLASS
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Criterion, Outcome, combine, deciding_places, exact, format_fixed, format_number

SELFTEST = Requirement("selftest run", "fxprobe selftest", commands=("selftest",))
BASELINE = Requirement("baseline comparison run",
                       "fxprobe gate g2 --measured BENCH... --reference examples/claims/reference-r2.toml",
                       has_field="baseline_comparison")
LINE_EFFICIENCY = Requirement("line-efficiency run", "fxprobe line-efficiency PEER",
                              commands=("line-efficiency",), has_field="summary.line_efficiency")
SOAK = Requirement("soak run", "fxprobe soak PROFILE --duration 72h", commands=("soak",))
REPORT_VERIFY = Requirement("verification of the signed joint-test report",
                            "fxprobe report verify REPORT --public-key SIGNER.pub", commands=("report verify",))
DRIVE_FAULT = Requirement("drive-pull fault run", "fxprobe fault run SCENARIO (kind drive-pull)",
                          commands=("fault run",), where=(("plan.kind", "drive-pull"),), unless=(("dry_run", True),))
LINK_FAULT = Requirement("link-cut fault run", "fxprobe fault run SCENARIO (kind link-down)",
                         commands=("fault run",), where=(("plan.kind", LINK_KINDS),), unless=(("dry_run", True),))


ARRAY_PREFIX = "array_"     # a reference table's columns of the array under test (examples/claims/reference-r2.toml)
BASELINE_NAME = "baseline within reference"


def baseline_deviation_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """G2: every metric of the single-node baseline within +-tolerance of its reference (the array's column, printed
    with its file); what the comparison recorded it could not compare (g2.problems) is NOT RUN, each."""
    tolerance = config.get("g2", "baseline_tolerance_pct")
    runs = evidence.matching(BASELINE)
    if not runs:
        return [BASELINE.absent(BASELINE_NAME, tolerance, "<=", "%")]
    criteria = []
    for run in runs:
        if run.errored:
            criteria.append(errored(BASELINE_NAME, run, tolerance, "<=", "%"))
            continue
        table, problems = run.get("baseline_comparison"), run.get("g2.problems", [])
        if not isinstance(table, dict) or not isinstance(problems, list) or not (table or problems):
            criteria.append(Criterion(BASELINE_NAME, Outcome.ERROR, detail="field 'baseline_comparison' is not a "
                                      "non-empty mapping (or g2.problems not a list)", evidence=run.evidence))
            continue
        criteria += [_baseline_entry(run, metric, entry, tolerance) for metric, entry in table.items()]
        criteria += [Criterion("baseline comparison", Outcome.NOT_RUN, None, tolerance, "<=", "%", str(problem),
                               run.evidence) for problem in problems]
    return criteria


def _figure(value) -> str:
    """A recorded figure exactly as recorded (7.53, never 7.5 nor 7.530000001)."""
    return repr(value) if isinstance(value, float) else str(value)


def _baseline_entry(run, metric: str, entry, tolerance) -> Criterion:
    name = f"baseline {metric} deviation"
    try:
        measured, reference = exact(entry["measured"]), exact(entry["reference"])
    except (KeyError, TypeError, ValueError):
        return Criterion(name, Outcome.ERROR, detail=f"baseline_comparison.{metric} needs finite numeric 'measured' "
                         "and 'reference'", evidence=run.evidence)
    unit = f" {entry['unit']}" if isinstance(entry.get("unit"), str) and entry["unit"] else ""
    source = f"{run.path}/{entry['file']}" if isinstance(entry.get("file"), str) else run.evidence
    column, where = entry.get("column"), entry.get("reference_file") or run.get("g2.reference", None)
    compared = f"measured {_figure(entry['measured'])}{unit} vs reference {_figure(entry['reference'])}{unit}"
    if not isinstance(column, str) or not column.startswith(ARRAY_PREFIX) or not isinstance(where, str):
        return Criterion(name, Outcome.NOT_RUN, None, tolerance, "<=", "%", f"{compared}: compared with column "
                         f"{column or '(not recorded)'} of {where or '(no reference file recorded)'}, not shown to be "
                         f"the array's figures ({ARRAY_PREFIX}*); run `{BASELINE.produce}` again", source)
    if reference == 0:
        return Criterion(name, Outcome.ERROR, detail=f"reference is 0 ({where} {column})", evidence=run.evidence)
    row = f" at {entry['row']}" if isinstance(entry.get("row"), str) else ""
    return Criterion.compare(name, abs(measured / reference - 1) * 100, "<=", tolerance, unit="%",
                             detail=f"{compared} ({where} {column}{row})", evidence=source)


LINE_RATE_NAME = "line efficiency vs the gate's line rate"
PORT_SPEED_NAME = "port nominal speed vs the gate's line rate"


def _port_speed(run) -> tuple[Fraction | None, str]:
    """The port's own reported speed; older runs without ``port_speed_bps`` give it only when the line
    rate was read from the port (not asserted with --line-rate)."""
    value = run.get("port_speed_bps", None)
    if value is None and str(run.get("line_rate_source", "")).startswith(NET_CLASS):
        value = run.get("line_rate_bps", None)
    try:
        return exact(value) / 10 ** 9, ""
    except ValueError:
        return None, f"{run.evidence}: the port's nominal speed is not recorded (port_speed_bps: {value!r})"


def line_rate_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """G2 stress test: goodput / the gate's line rate (g2.line_rate_gbps, not the port's own speed) >= the
    minimum, and the port's nominal speed >= that line rate (a 10 GbE port cannot pass a 100 GbE gate)."""
    rate, least = config.get("g2", "line_rate_gbps"), config.get("g2", "line_efficiency_min_pct")
    against = f"against the gate's line rate {format_number(rate)} Gb/s (g2.line_rate_gbps, {config.source})"

    def efficiency(name: str, run: RunRecord) -> Criterion:
        goodput = run.get("summary.mean_bps", None)
        try:
            pct = exact(goodput) / (exact(rate) * 10 ** 9) * 100
            gbps, need = exact(goodput) / 10 ** 9, exact(least) * exact(rate) / 100     # the same test in Gb/s
            shown = format_fixed(gbps, deciding_places(gbps, ">=", need))   # "83 Gb/s" never beside 82.99996 %
            return Criterion.compare(name, pct, ">=", least, unit="%", evidence=run.evidence,
                                     detail=f"goodput {shown} Gb/s {against}; {run.get('label', '?')}")
        except (ValueError, TypeError, ZeroDivisionError):
            return Criterion(name, Outcome.ERROR, None, least, ">=", "%",
                             f"{run.evidence}: summary.mean_bps is not a finite number ({goodput!r})", run.evidence)

    def port_speed(name: str, run: RunRecord) -> Criterion:
        speed, problem = _port_speed(run)
        port = f"{run.get('interface', '?')} as it reports itself"
        return Criterion.compare(name, speed, ">=", rate, unit="Gb/s", detail=problem or f"{port}; {against}",
                                 evidence=run.evidence) if speed is not None else \
            Criterion(name, Outcome.ERROR, None, rate, ">=", "Gb/s", problem, run.evidence)
    return per_run(LINE_EFFICIENCY, LINE_RATE_NAME, evidence, efficiency, least, ">=", "%") + \
        per_run(LINE_EFFICIENCY, PORT_SPEED_NAME, evidence, port_speed, rate, ">=", "Gb/s")


DATA_NAME = "data verified (mismatches)"
DATA_RUNS = (("soak", SOAK), ("drive pull", DRIVE_FAULT), ("link cut", LINK_FAULT))


def _run_data(label: str, run, limit) -> tuple[Outcome, int, str]:
    """One run's own data criterion: (outcome here, bad reads, a short text)."""
    if run.errored:
        return Outcome.ERROR, 0, f"{label}: {run.error_reason()}"
    own = run.get(f"criteria.name={DATA_NAME}|verdict.criteria.name={DATA_NAME}", None)
    if not isinstance(own, dict):
        return Outcome.ERROR, 0, f"{label}: {run.evidence} records no '{DATA_NAME}' (an fxprobe that did not verify)"
    detail = str(own.get("detail") or "")
    if own.get("outcome") == Outcome.NOT_RUN.value:
        return Outcome.NOT_RUN, 0, f"{label}: {detail}"
    if own.get("outcome") == Outcome.ERROR.value:      # a read-back that failed or is missing
        return Outcome.ERROR, 0, f"{label}: {detail}"
    try:
        count = exact(own.get("measured"))
    except (TypeError, ValueError):
        count = Fraction(-1)
    if count < 0 or count.denominator != 1:     # a negative count would cancel another run's bad reads
        return Outcome.ERROR, 0, f"{label}: measured {own.get('measured')!r} is not a count (a whole number >= 0)"
    bad = int(count)
    over = re.search(r"over [\d.]+ GiB", detail)
    text = f"{label} {bad} {over.group(0) if over else ''}".rstrip()
    if bad:
        text += f" ({detail.split(';')[0]})"
    return (Outcome.FAIL if bad > limit else Outcome.PASS), bad, text


def data_verified_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """G4: invisible to the workload includes the data - the soak's and the drive-pull / link-cut fault runs' own
    verification (fio verify headers: offset and checksum of every block read back), re-judged together."""
    limit = config.get("g4", "data_mismatches_max")
    runs = [(label, run) for label, requirement in DATA_RUNS for run in evidence.matching(requirement)]
    if not runs:
        return [SOAK.absent(DATA_NAME, limit, "<=")]
    counts = {label: sum(1 for other, _ in runs if other == label) for label, _ in runs}
    judged = [_run_data(label if counts[label] == 1 else f"{label} [{run.label}]", run, limit) for label, run in runs]
    total = sum(bad for _, bad, _ in judged)
    outcome = combine([o for o, _, _ in judged] + ([Outcome.FAIL] if total > limit else []))
    detail = "; ".join(text for _, _, text in judged)
    check = Criterion.compare(DATA_NAME, total, "<=", limit, detail=detail, evidence=runs[0][1].evidence)
    return [check if outcome is check.outcome else replace(check, outcome=outcome)]


SIGNED_NAME = "signed joint-test report verified"
SIGNED_RUNS = (("soak", SOAK), ("drive pull", DRIVE_FAULT), ("link cut", LINK_FAULT))   # what the report must carry
TRUSTED_KEY = "gates.toml [g4] trusted_signers"


def _signed(run, trusted: tuple[str, ...]) -> tuple[Outcome, str]:
    """The verification itself: intact, signature valid, and the signer one the buyer named in the gates config
    (who verified, and against which key, does not make a signer trusted): none named is NOT RUN."""
    signer, source = str(run.get("verification.signer", "") or ""), run.get("verification.key_source", "?")
    where = f"report {run.get('verification.folder', '?')}, signer {signer or '-'} (key: {source})"
    problems = run.get("verification.problems", []) or []
    if not run.get("verification.ok", False) or run.get("verification.signature") != "valid":
        return Outcome.FAIL, f"NOT VERIFIED: {'; '.join(map(str, problems)) or 'signature not valid'}; {where}"
    if not trusted:
        return Outcome.NOT_RUN, (f"no trusted signer configured: set {TRUSTED_KEY} = [\"{signer}\"] (the fingerprint "
                                 "of the key whose signature the buyer accepts; `report keygen` prints it) - a key "
                                 f"pinned at verify time is the verifier's choice, not the buyer's; {where}")
    if signer not in trusted:
        return Outcome.FAIL, f"signed by {signer}, not one of the trusted signers {', '.join(trusted)}; {where}"
    return Outcome.PASS, f"{where}, a trusted signer ({TRUSTED_KEY})"


def _carried(run, evidence: Evidence) -> tuple[Outcome, str]:
    """The verified bundle carries the soak and fault runs this gate judged (the same folders: their manifests'
    SHA-256 among the bundle's runs), so the signature is over the evidence of this verdict."""
    judged = [(label, other) for label, requirement in SIGNED_RUNS for other in evidence.matching(requirement)]
    if not judged:
        return Outcome.NOT_RUN, "no soak or fault run among the evidence: nothing for the signed report to carry"
    bundled = run.get("verification.runs", None)
    if not isinstance(bundled, list):
        return Outcome.NOT_RUN, ("the verification lists no bundled runs (an fxprobe before it did): run `report "
                                 "verify` again to tie the signature to the soak and fault runs")
    shas = {entry.get("manifest_sha256") for entry in bundled if isinstance(entry, dict)}
    absent = [f"{label} {other.path.name}" for label, other in judged
              if RunDir(other.path).manifest_sha256() not in shas]
    if absent:
        return Outcome.FAIL, (f"the signed report does not carry {', '.join(absent)} (not among its "
                              f"{len(bundled)} bundled runs, or another version of it): it does not sign this evidence")
    return Outcome.PASS, f"carries the {', '.join(f'{label} {other.path.name}' for label, other in judged)}"


def signed_report_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    def judge(name: str, run: RunRecord) -> Criterion:
        outcome, detail = _signed(run, config.trusted_signers())
        if outcome is Outcome.PASS:
            outcome, carried = _carried(run, evidence)
            detail = f"{detail}; {carried}"
        return Criterion(name, outcome, outcome.value, "pass", "==", "", detail, run.evidence)
    return per_run(REPORT_VERIFY, SIGNED_NAME, evidence, judge, "pass", "==")


EVERY_ARRAY_NAME = "every array self-tested"


def every_array_criteria(evidence: Evidence, config: GateConfig) -> list[Criterion]:
    """G1 covers the fleet: every array named in gates.toml ``g1.arrays`` (or ``gate g1 --arrays``) has a
    self-test among the evidence (a fleet run's sub-run per node, or a run that recorded that host name)."""
    wanted = config.arrays()
    if not wanted:
        return []
    runs = evidence.matching(SELFTEST)
    seen = {run.array for run in runs}
    missing = [name for name in wanted if name not in seen]
    evidence_file = next((run.evidence for run in runs), "")
    if missing:
        return [Criterion(EVERY_ARRAY_NAME, Outcome.NOT_RUN, f"{len(wanted) - len(missing)}/{len(wanted)}",
                          f"{len(wanted)}/{len(wanted)}", "==", "",
                          f"no selftest of {', '.join(missing)} among the evidence (arrays self-tested: "
                          f"{', '.join(sorted(a for a in seen if a)) or 'none'}); run `fxprobe selftest --nodes "
                          f"{','.join(wanted)}` and pass its run directory with --evidence",
                          evidence_file, missing=f"no selftest of {', '.join(missing)} among the evidence")]
    return [Criterion(EVERY_ARRAY_NAME, Outcome.PASS, f"{len(wanted)}/{len(wanted)}", f"{len(wanted)}/{len(wanted)}",
                      "==", "", "arrays: " + ", ".join(wanted), evidence_file)]


def rebuild_notes(evidence: Evidence, config: GateConfig) -> list[str]:
    """G4 information, never judged: each drive pull's md rebuild - how long md ran degraded and rebuilt, and the
    load's throughput and p99 meanwhile (a criterion only where the scenario itself asked for one)."""
    from fxprobe.faults.rebuild import Rebuild
    out = []
    for run in evidence.matching(DRIVE_FAULT):
        data = run.get("rebuild", None)
        if not isinstance(data, dict):
            continue
        lines = Rebuild.from_dict(data).lines()
        if lines:
            out.append(f"drive pull: {lines[0]}; " + "; ".join(line.strip() for line in lines[1:])
                       + f" [evidence: {run.evidence}]")
    return out


G1 = Gate("g1", "delivery acceptance", checks=(
    Check("drives recognized", SELFTEST, "drives_recognized|verdict.criteria.name=drives recognized.measured",
          ">=", "drives_expected"),
    OutcomeCheck("self-test passed", SELFTEST),
    *G1_UNITS,
), extras=(Judge(EVERY_ARRAY_NAME, (), every_array_criteria),))
G2 = Gate("g2", "single-node baseline", extras=(
    Judge(LINE_RATE_NAME, ("line_efficiency_min_pct", "line_rate_gbps"), line_rate_criteria),
    Judge("baseline within reference", ("baseline_tolerance_pct",), baseline_deviation_criteria),
    array_judge(LINE_EFFICIENCY)), notes=(file_checks(BASELINE),))
G4 = Gate("g4", "stability and sign-off", checks=(
    Check("soak duration", SOAK, "duration_s", ">=", "soak_hours_min", unit="h", scale=Fraction(1, 3600),
          context=(("load covered s", "duration_s"), ("planned s", "planned_s"), ("profile", "profile"))),
    Check("soak interruptions", SOAK, "interruptions", "<=", "interruptions_max", count=True),
    Check("soak stall limit (--stall)", SOAK, "stall_s", "<=", "soak_stall_max_s", unit="s"),
    soak_clock(SOAK),
    *fault_units("drive pull", DRIVE_FAULT),
    *fault_units("link cut", LINK_FAULT),
), extras=(Judge(DATA_NAME, ("data_mismatches_max",), data_verified_criteria),
          Judge(SIGNED_NAME, (), signed_report_criteria), array_judge(SOAK, DRIVE_FAULT, LINK_FAULT)),
          notes=(rebuild_notes,))

GATES = {"g1": G1, "g2": G2, "g3": G3, "g4": G4}


def evaluate_all(evidence: Evidence, config: GateConfig) -> list:
    """Every gate's Verdict, in order G1..G4, from the same evidence."""
    return [gate.evaluate(evidence, config) for gate in GATES.values()]


def asides(evidence_paths: list[Path], config: GateConfig) -> dict:
    """What a gate run records beside its verdicts, never a criterion: the measuring runs the ledger beside its
    evidence lists that it was not given (gates.omitted), and the programs its evidence ran that cannot be traced
    to a package (report.provenance: the report's decision is INCOMPLETE over them)."""
    from fxprobe.report.provenance import review_folders, trusted_from
    traced = review_folders(list(evidence_paths), trusted_from(config.to_dict()))
    return {"ledger": omitted.review(evidence_paths, (config.array.period_from, config.array.period_until),
                                     config.ledger.checkpoints),
            "provenance": {"untraced": list(traced.untraced), "notes": list(traced.notes)}}


def aside_lines(results: dict) -> list[str]:
    recorded = results.get("provenance") if isinstance(results.get("provenance"), dict) else {}
    return [f"TOOL NOT TRACEABLE: {line}" for line in recorded.get("untraced") or []] + \
        list(recorded.get("notes") or []) + omitted.lines(results.get("ledger"))


def judge_all(evidence_paths: list[Path], config: GateConfig) -> tuple[Outcome, dict, list[str]]:
    """``gate all`` as a library call: (outcome, the results a run records, the lines a person reads)."""
    from fxprobe.core.verdict import combine
    from fxprobe.gates.engine import summary_row, verdict_lines
    verdicts = evaluate_all(Evidence.from_paths(evidence_paths), config)
    human = [f"gate table ({config.source}):"] + (config.scale_lines() if config.custom else [])
    human += ["  " + summary_row(v) for v in verdicts]
    for verdict in verdicts:
        human += verdict_lines(verdict)
    results = {"gates": [v.to_dict() for v in verdicts], "thresholds": config.to_dict(),
               "evidence": [str(p) for p in evidence_paths], "evidence_runs": Evidence.record(evidence_paths),
               **asides(evidence_paths, config)}
    return combine([v.outcome for v in verdicts]), results, human + aside_lines(results)
