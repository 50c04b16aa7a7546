"""G4's fault criteria: "single-drive and single-link fault injection stays invisible to the workload", judged on
each drive-pull and link-cut fault run's own measured figures against the thresholds of gates.toml ``[g4]``.

What a fault run records (the producers' typed fields: :class:`fxprobe.faults.analysis.Impact`,
:class:`fxprobe.faults.overrun.Overrun`), and what G4 compares:

    impact.errors            I/O errors the workload saw              <= g4.fault_visible_errors_max (0)
    impact.longest_stall_s   longest time with no successful I/O       <= g4.fault_stall_max_s (2 s)
    impact.throughput_pct    fault window vs the steady state before   >= g4.fault_throughput_min_pct (50 %)
    impact.p99_ratio         p99 in the fault window / p99 before      <= g4.fault_p99_ratio_max (10 x)
    load_hung                the load ended by its planned end + grace (null: it did)
    fault_seen.seen          the fault's effect observed in its window (faults.seen: md degraded, the drive
                             removed, a load path not live, a link carrying one down): else ERROR, never judged
    scenario.timing.fault_s  how long the fault lasted                >= g4.fault_window_min_s (30 s)
    scenario.timing.recover_s  load judged after the restore           >= g4.fault_recover_min_s (30 s)
    verify.plan.region_bytes the region laid out, loaded and verified  >= g4.fault_region_min_mib (1024 MiB)

A fault shorter than the hosts' failover, a load watched for only a moment after the restore (a stall that starts
when the path comes back is judged only within timing.recover_s + 2 s of it) or a region an array's cache holds
whole can make any fault look invisible: G4 prints each run's own figure beside these minimums and fails a run below.

A soak's ``coverage_clock`` must be "monotonic" (soak.summary: covered time counted on the monotonic clock of each
receipt, never a wall-clock step); a soak without it is an ERROR, its duration not evidence.

(The data each fault run read back is judged with the soak's in G4's one "data verified" row, gates.catalog.)

The thresholds are the gate's, not the scenario file's: a scenario written with laxer criteria cannot make a fault
pass G4, and a lab-scaled gates file can scale them (each printed SCALED with its reason). The scenario's own
verdict is shown beside the figures as information.
"""

from __future__ import annotations

from fractions import Fraction

from fxprobe.core.verdict import Criterion, Outcome
from fxprobe.gates.config import GateConfig
from fxprobe.gates.engine import MISSING, Check, Evidence, Judge, Requirement, RunRecord, per_run

OWN_VERDICT = (("scenario", "plan.scenario"), ("its own verdict", "verdict"))
NO_COMPLETIONS = "not measured: the load logged no completion (see 'load ended by its planned end')"


def _ended(name: str, run: RunRecord) -> Criterion:
    hung = run.get("load_hung")
    if hung is MISSING:
        return Criterion(name, Outcome.ERROR, None, "yes", "==", "", f"{run.evidence} has no field 'load_hung'",
                         run.evidence)
    if hung is None:
        return Criterion(name, Outcome.PASS, "yes", "yes", "==", "", "", run.evidence)
    waited = hung.get("waited_s") if isinstance(hung, dict) else None
    return Criterion(name, Outcome.FAIL, "no", "yes", "==", "", f"still running {waited} s after its planned end "
                     f"and stopped ({hung.get('stopped', '?') if isinstance(hung, dict) else '?'})", run.evidence)


def _seen(name: str, run: RunRecord) -> Criterion:
    """The run observed its fault's effect in the fault window (faults.seen): else its figures show no fault."""
    seen = run.get("fault_seen")
    if seen is MISSING or not isinstance(seen, dict):
        return Criterion(name, Outcome.ERROR, None, "yes", "==", "", f"{run.evidence} records no 'fault_seen': the "
                         "run did not check that its fault happened (an fxprobe before that check)", run.evidence)
    if seen.get("seen") is True:
        return Criterion(name, Outcome.PASS, "yes", "yes", "==", "", "; ".join(map(str, seen.get("evidence") or [])),
                         run.evidence)
    return Criterion(name, Outcome.ERROR, "no", "yes", "==", "", f"the fault was not seen: no "
                     f"{seen.get('looked_for', '?')} in its window", run.evidence)


SOAK_CLOCK_NAME = "soak covered time on the monotonic clock"


def _soak_clock(name: str, run: RunRecord) -> Criterion:
    """A soak's covered time counts only on the monotonic clock it recorded at each receipt: counted on the wall
    clock (records without it), a clock step forward (date -s, an NTP step) would count as hours of load."""
    clock = run.get("coverage_clock")
    if clock == "monotonic":
        return Criterion(name, Outcome.PASS, "monotonic", "monotonic", "==", "", "each sample received on the "
                         "monotonic clock; a wall-clock step is a 'clock' interruption", run.evidence)
    said = "records no 'coverage_clock'" if clock is MISSING else f"counted its covered time on the {clock} clock"
    return Criterion(name, Outcome.ERROR, None if clock is MISSING else str(clock), "monotonic", "==", "",
                     f"{run.evidence} {said} (an fxprobe before the monotonic clock): a wall-clock step would have "
                     "counted as load, so its duration is not evidence", run.evidence)


def soak_clock(requirement: Requirement) -> Judge:
    def judge(evidence: Evidence, config: GateConfig) -> list[Criterion]:
        return per_run(requirement, SOAK_CLOCK_NAME, evidence, _soak_clock, "monotonic", "==", not_run=True)
    return Judge(SOAK_CLOCK_NAME, (), judge)


def fault_units(what: str, requirement: Requirement) -> tuple:
    """The invisibility criteria of one fault kind ("drive pull", "link cut"), each against a [g4] threshold."""
    def ended(evidence: Evidence, config: GateConfig) -> list[Criterion]:
        return per_run(requirement, f"{what}: load ended by its planned end", evidence, _ended, "yes", "==",
                       not_run=True)

    def seen(evidence: Evidence, config: GateConfig) -> list[Criterion]:
        return per_run(requirement, f"{what}: fault seen in its window", evidence, _seen, "yes", "==", not_run=True)

    return (
        Judge(f"{what}: fault seen in its window", (), seen),
        Check(f"{what}: fault lasted (timing.fault_s)", requirement, "scenario.timing.fault_s", ">=",
              "fault_window_min_s", unit="s"),
        Check(f"{what}: load judged after the restore (timing.recover_s)", requirement, "scenario.timing.recover_s",
              ">=", "fault_recover_min_s", unit="s"),
        Check(f"{what}: region verified (load.region)", requirement, "verify.plan.region_bytes", ">=",
              "fault_region_min_mib", unit="MiB", scale=Fraction(1, 2**20),
              context=(("bytes", "verify.plan.region_bytes"), ("verify", "verify.plan.method"))),
        Check(f"{what}: I/O errors seen by the workload", requirement, "impact.errors", "<=",
              "fault_visible_errors_max", count=True, context=OWN_VERDICT),
        Check(f"{what}: longest stall (no completed I/O)", requirement, "impact.longest_stall_s", "<=",
              "fault_stall_max_s", unit="s", unmeasured=NO_COMPLETIONS,
              context=(("the scenario's own limit s", "scenario.criteria.max_stall_s"),)),
        Check(f"{what}: throughput in the fault window vs pre-fault", requirement, "impact.throughput_pct", ">=",
              "fault_throughput_min_pct", unit="%", unmeasured=NO_COMPLETIONS),
        Check(f"{what}: p99 latency in the fault window / pre-fault p99", requirement, "impact.p99_ratio", "<=",
              "fault_p99_ratio_max", unit="x",
              unmeasured="not measured: no latency histogram for the fault window (no I/O completed in it: see the "
                         "stall)"),
        Judge(f"{what}: load ended by its planned end", (), ended),
    )
