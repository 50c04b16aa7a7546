"""The decision first: ACCEPTED / NOT ACCEPTED / INCOMPLETE, the thresholds it was judged with, and per gate
the criterion that decided it with its figure.

The decision over one ``gate`` run (``gate all`` judges G1-G4 at once):

- ACCEPTED      every one of G1, G2, G3 and G4 was judged and passed;
- NOT ACCEPTED  at least one gate failed (a criterion measured on the wrong side of its threshold);
- INCOMPLETE    no gate failed, but a gate is missing, not run or in error, or a pass rests on a figure
                above its physical ceiling (a measurement artefact, see :mod:`fxprobe.report.ceilings`);
- PASSED AT LAB SCALE   what would be ACCEPTED, judged with lab-scaled thresholds (``[scale] lab_scaled``):
                never an acceptance, and the line says how many thresholds were scaled and criteria left out;
- PASSED WITH CUSTOM THRESHOLDS   what would be ACCEPTED, judged with values that depart from the buyer's
                defaults (a ./gates.toml, any file): never an acceptance, and the line names each departure.

ACCEPTED (or either PASSED) also needs every evidence folder the gate run read in the report, intact, and every
measuring program those folders ran to be the one its package installed, unchanged (:mod:`fxprobe.report.provenance`).

A gate's deciding criterion: for a gate that failed, the failing criterion furthest from its threshold
(relative to the threshold); for error / not run, the first such criterion; for a pass, the criterion
closest to its threshold (the one a re-run would flip first).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from pathlib import Path

from fxprobe.core.verdict import Criterion, Outcome, Verdict
from fxprobe.gates.config import CUSTOM, departure_text, departures
from fxprobe.gates import omitted
from fxprobe.gates.measured_array import NAME
from fxprobe.report.ceilings import artefact
from fxprobe.report.provenance import Provenance

GATES = ("G1", "G2", "G3", "G4")


class Decision(str, enum.Enum):
    ACCEPTED = "ACCEPTED"
    NOT_ACCEPTED = "NOT ACCEPTED"
    INCOMPLETE = "INCOMPLETE"
    LAB_PASS = "PASSED AT LAB SCALE"       # every gate passed lab-scaled thresholds: not an acceptance
    CUSTOM_PASS = "PASSED WITH CUSTOM THRESHOLDS"   # every gate passed thresholds that are not the buyer's


@dataclass(frozen=True)
class GateLine:
    gate: str                    # "G4 stability and sign-off"
    outcome: Outcome
    deciding: Criterion | None
    artefact: str = ""           # why a passing figure is not believed
    others: int = 0              # further criteria with the gate's outcome

    @property
    def figure(self) -> str:
        """The deciding criterion's figure as the gate table prints it (and why, when it was not judged)."""
        c = self.deciding
        if c is None:
            return "no criteria"
        need = f" (need {c.comparator} {c.threshold_text()})" if c.comparator else ""
        if c.measured is None:             # not run or error: what it needed and why it has no figure
            return f"{c.name}{need}: " + (c.detail.split(";")[0] if c.detail else "no measurement")
        text = f"{c.name}: {c.measured_text()}{need}"
        if c.outcome in (Outcome.NOT_RUN, Outcome.ERROR) and c.detail:
            text += f" - {c.detail.split(';')[0]}"
        return text

    @property
    def word(self) -> str:
        return "ARTEFACT" if self.artefact else self.outcome.value.upper()

    @property
    def more(self) -> str:
        """" (and 2 more fail)" when the deciding criterion is not the only one with the gate's outcome."""
        return f" (and {self.others} more {self.outcome.value})" if self.others and self.outcome is not Outcome.PASS else ""

    def line(self) -> str:
        return f"{self.gate}: {self.word} - {self.figure}{self.more}" + (f" - {self.artefact}" if self.artefact else "")


@dataclass(frozen=True)
class Headline:
    decision: Decision
    thresholds: str              # "buyer's thresholds", "lab-scaled thresholds" or "custom thresholds"
    source: str                  # where they were read (gates.toml, gates-lab.toml, built-in defaults)
    gates: tuple[GateLine, ...]
    missing: tuple[str, ...]     # gates not judged by this run
    run: str                     # the gate run folder's name
    scale: str = ""              # lab-scaled: "5 thresholds SCALED, 4 NOT JUDGED ..."; custom: each departure
    untied: tuple[str, ...] = ()  # evidence the gate run read that is not in the report, intact (never ACCEPTED)
    differs: tuple[str, ...] = ()  # its criteria its evidence, judged again, does not give (never ACCEPTED)
    array: str = ""              # the array the G2-G4 evidence measured, as the gate run judged it, and the period
    untraced: tuple[str, ...] = ()  # tools its evidence ran that no package installed, or changed since (never ACCEPTED)
    origin_notes: tuple[str, ...] = ()  # builds the buyer trusts by SHA-256; programs with no origin recorded
    not_given: tuple[str, ...] = ()  # measuring runs the ledger beside its evidence lists that it was not given
    handed: tuple[str, ...] = ()     # benchmark files no fxprobe run witnessed, not admitted (never ACCEPTED)

    def lines(self) -> list[str]:
        head = f"{self.decision.value} - judged with the {self.thresholds} ({self.source})"
        head += f"; {self.scale}" if self.scale else ""
        head += f"; {len(self.untied)} of the gate run's evidence not in this report, intact" if self.untied else ""
        head += f"; {len(self.differs)} criteria not what its evidence gives" if self.differs else ""
        head += f"; {len(self.untraced)} measuring tools not traceable to a package" if self.untraced else ""
        head += f"; {len(self.handed)} benchmark files handed over" if self.handed else ""
        out = [head] + ([f"  array: {self.array}"] if self.array else []) + ["  " + g.line() for g in self.gates]
        out += [f"  {gate}: NOT JUDGED - no criteria for it in this gate run" for gate in self.missing]
        out += [f"  EVIDENCE NOT IN THIS REPORT: {line}" for line in self.untied]
        out += [f"  NOT WHAT ITS EVIDENCE GIVES: {line}" for line in self.differs]
        out += [f"  TOOL NOT TRACEABLE: {line}" for line in self.untraced]
        out += [f"  BENCHMARK FILE HANDED OVER: {line}" for line in self.handed]
        out += [f"  {line}" for line in self.origin_notes + self.not_given]
        return out


def _relative_margin(c: Criterion) -> tuple[int, float]:
    """Sort key: criteria with a margin relative to a non-zero threshold first, by that fraction; then the rest."""
    if c.margin is None or not isinstance(c.threshold, (int, float)) or not c.threshold:
        return (1, 0.0)
    return (0, c.margin / abs(c.threshold))


def deciding(verdict: Verdict) -> Criterion | None:
    outcome = verdict.outcome
    pool = [c for c in verdict.criteria if c.outcome is outcome]
    if not pool:
        return None
    if outcome is Outcome.FAIL:
        return min(pool, key=_relative_margin)
    if outcome is Outcome.PASS:
        numeric = [c for c in pool if c.margin is not None]
        return min(numeric, key=_relative_margin) if numeric else pool[0]
    return pool[0]


def scale_summary(results: dict) -> str:
    """How far lab-scaled thresholds depart from the buyer's, counted ("" for the buyer's)."""
    block = results.get("thresholds") if isinstance(results.get("thresholds"), dict) else {}
    scale = block.get("scale") if block.get("lab_scaled") is True and isinstance(block.get("scale"), dict) else None
    if scale is None:
        return ""
    scaled, left_out = len(scale.get("scaled") or {}), len(scale.get("not_judged") or {})
    return (f"not the buyer's: {scaled} threshold{'s' * (scaled != 1)} SCALED, {left_out} NOT JUDGED at lab scale "
            "(each with its reason)")


def custom_values(results: dict) -> tuple[str, ...]:
    """Each value a gate run was judged with that departs from the buyer's defaults, "key = value (the buyer's
    default)", recomputed from its recorded ``thresholds`` (a lab-scaled run's are its SCALED ones: none here)."""
    block = results.get("thresholds") if isinstance(results.get("thresholds"), dict) else {}
    if block.get("lab_scaled") is True:
        return ()
    return tuple(departure_text(*d) for d in departures(block.get("thresholds") or {}))


def thresholds_label(results: dict) -> tuple[str, str]:
    """("lab-scaled thresholds" | "custom thresholds" | "buyer's thresholds", source) from a gate run's
    ``thresholds``: any value departing from the buyer's defaults makes them custom, whatever the file's name."""
    block = results.get("thresholds") if isinstance(results.get("thresholds"), dict) else {}
    source = str(block.get("source") or "not recorded")
    if custom_values(results):
        return CUSTOM, source
    label = block.get("label") or block.get("scale")
    if isinstance(label, str) and label:
        return (label if "threshold" in label else f"{label} thresholds"), source
    lab = "lab" in Path(source).name.lower() or block.get("lab_scaled") is True
    return ("lab-scaled thresholds" if lab else "buyer's thresholds"), source


def gate_line(verdict: Verdict) -> GateLine:
    c = deciding(verdict)
    others = sum(1 for x in verdict.criteria if x.outcome is verdict.outcome) - 1
    if verdict.outcome is Outcome.PASS:
        flagged = [why for why in map(artefact, verdict.criteria) if why]
        if flagged:
            return GateLine(verdict.name, verdict.outcome, c, flagged[0], others)
    return GateLine(verdict.name, verdict.outcome, c, others=max(0, others))


def decide(lines: list[GateLine], missing: list[str]) -> Decision:
    if any(g.outcome is Outcome.FAIL for g in lines):
        return Decision.NOT_ACCEPTED
    if missing or any(g.outcome is not Outcome.PASS or g.artefact for g in lines):
        return Decision.INCOMPLETE
    return Decision.ACCEPTED


def headline(run_name: str, results: dict, verdicts: tuple[Verdict, ...], untied: tuple[str, ...] = (),
             differs: tuple[str, ...] = (), traced: Provenance = Provenance()) -> Headline:
    """The decision of one gate run; ``untied``: its evidence not in the report intact (:func:`untied`), ``differs``:
    its criteria that its evidence judged again does not give (report.rejudge), ``untraced``: measuring tools its
    evidence ran that no package installed, that changed since or that nobody could check, and the builds the buyer
    trusts by SHA-256 (``traced``, report.provenance): any untraced one makes what would be ACCEPTED (or PASSED AT
    LAB SCALE) INCOMPLETE."""
    untraced = traced.untraced
    lines = [gate_line(v) for v in verdicts]
    judged = {v.name.split()[0].upper() for v in verdicts}
    missing = [g for g in GATES if g not in judged]
    label, source = thresholds_label(results)
    decision = decide(lines, missing)
    custom = custom_values(results)
    if decision is Decision.ACCEPTED and label != "buyer's thresholds":
        decision = Decision.CUSTOM_PASS if custom else Decision.LAB_PASS
    unproven = untied or differs or untraced or traced.handed
    if unproven and decision in (Decision.ACCEPTED, Decision.LAB_PASS, Decision.CUSTOM_PASS):
        decision = Decision.INCOMPLETE
    scale = (f"not the buyer's: {len(custom)} value{'s' * (len(custom) != 1)} "
             f"{'differ' if len(custom) != 1 else 'differs'} from the buyer's defaults: " + ", ".join(custom)) \
        if custom else scale_summary(results)
    return Headline(decision, label, source, tuple(lines), tuple(missing), run_name, scale, tuple(untied),
                    tuple(differs), array_text(results, verdicts), tuple(untraced), traced.notes,
                    tuple(omitted.lines(results.get("ledger"))), traced.handed)


def array_text(results: dict, verdicts: tuple[Verdict, ...]) -> str:
    """What array the decision is about: the one gates.toml [array] named, or the one the runs agreed on (said so),
    and the acceptance period; "" when no G2-G4 run touched an array."""
    rows = [c for v in verdicts for c in v.criteria if c.name.startswith(NAME)]
    if not rows:
        return ""
    named = str(rows[0].threshold)
    recorded = (results.get("thresholds") or {}).get("array") if isinstance(results.get("thresholds"), dict) else None
    recorded = recorded if isinstance(recorded, dict) else {}
    since, until = recorded.get("period_from"), recorded.get("period_until")
    period = f"acceptance period {since or '...'} .. {until or '...'}" if since or until else "no acceptance period named"
    unnamed = "" if named.startswith("the array named") else " - not named in gates.toml [array]"
    failed = sum(c.outcome is not Outcome.PASS for c in rows)
    return f"{named}{unnamed}; {period}" + (f"; {failed} of {len(rows)} runs not tied to it" if failed else "")


def untied(gate_run, runs) -> tuple[str, ...]:
    """Each folder a gate run read (its ``evidence_runs``: name and manifest SHA-256) that no run of the report
    (RunViews) matches, intact, one line each: a verdict is only as good as the evidence beside it."""
    recorded = gate_run.results.get("evidence_runs")
    if not isinstance(recorded, list):
        return (f"gate run {gate_run.name} records no manifest of the folders it read (an fxprobe before "
                "'evidence_runs'): its verdicts cannot be tied to the evidence in this report; judge the gates again",)
    present = {run.manifest: run for run in runs if not run.problems}
    out = []
    for entry in recorded:
        entry = entry if isinstance(entry, dict) else {}
        name, sha = str(entry.get("name") or entry.get("path") or "?"), entry.get("manifest_sha256")
        found = present.get(sha) if isinstance(sha, str) else \
            next((run for run in runs if run.name == name and run.manifest is None and not run.problems), None)
        if found is None:
            changed = [run.name for run in runs if run.name == name]
            why = "in this report but not as the gate read it (another manifest)" if changed else "not in this report"
            out.append(f"{name} (manifest SHA-256 {str(sha)[:16]}): {why}")
    return tuple(out)


def bundle_headlines(folder: Path) -> list[Headline]:
    """The decisions of a report bundle (one per gate run under ``evidence/``), buyer's thresholds first."""
    from fxprobe.report.collect import read_run
    from fxprobe.report.provenance import provenance
    from fxprobe.report.rejudge import differences
    runs = [read_run(p) for p in sorted((Path(folder) / "evidence").iterdir()) if (p / "results.json").is_file()] \
        if (Path(folder) / "evidence").is_dir() else []
    heads = [headline(run.name, run.results, run.gates, untied(run, runs), differences(run, runs),
                      provenance(run, runs)) for run in runs if run.gates]
    return sorted(heads, key=lambda h: h.thresholds != "buyer's thresholds")
