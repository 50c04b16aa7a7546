"""A report decides only from criteria that agree with their own figures, over the evidence its gate run read:
a stored outcome that contradicts its measured value and threshold is refused (ERROR), and a gate run's evidence
folders (their manifests' SHA-256, recorded when the gates ran) must be in the report, intact, or it is never
ACCEPTED. Each test plants the "fail" twin beside the honest record."""

from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path

from fxprobe.core.verdict import Criterion, Outcome, Verdict
from fxprobe.report.build import build_report
from fxprobe.report.headline import Decision, bundle_headlines
from gate_helpers import fxprobe, results_of, rewritten, runs_of

CAPTURED = Path(__file__).parent / "fixtures" / "report" / "rehearsal"
SOAK = {"name": "soak duration", "outcome": "pass", "measured": 80.0, "threshold": 72.0, "comparator": ">=",
        "unit": "h"}


def test_a_stored_outcome_that_contradicts_its_own_figures_is_refused():
    assert Criterion.from_dict(SOAK).outcome is Outcome.PASS
    assert Criterion.from_dict({**SOAK, "measured": 71.9, "outcome": "fail"}).outcome is Outcome.FAIL
    refused = Criterion.from_dict({**SOAK, "measured": 0.0066})
    assert refused.outcome is Outcome.ERROR and refused.measured == 0.0066
    assert refused.detail.startswith("REFUSED: recorded as PASS, but its own figures 0.0066 h >= 72 h give FAIL")
    assert Criterion.from_dict({**SOAK, "outcome": "fail"}).outcome is Outcome.ERROR          # and the other way
    for kept in ({**SOAK, "measured": 0.0066, "outcome": "not run"}, {**SOAK, "measured": "yes", "threshold": "yes"},
                 {**SOAK, "comparator": ""}, {**SOAK, "measured": None, "outcome": "error"}):
        assert Criterion.from_dict(kept).outcome is Outcome(kept["outcome"]), kept    # nothing numeric to re-judge
    # a figure within float rounding of its threshold is the producer's exact decision (82.99999999999999999 %)
    close = Criterion.compare("x", Fraction(83) - Fraction(1, 10 ** 17), ">=", 83.0).to_dict()
    assert (close["outcome"], close["measured"]) == ("fail", 83.0)
    assert Criterion.from_dict(close).outcome is Outcome.FAIL
    verdict = Verdict.from_dict({"name": "G4", "criteria": [SOAK, {**SOAK, "measured": 0.0066}]})
    assert verdict.outcome is Outcome.ERROR


def captured_copy(tmp_path: Path) -> list[Path]:
    """The rehearsal's steps and its buyer's gate all run, copied."""
    names = [p.name for p in sorted(CAPTURED.iterdir()) if "lab-scaled" not in p.name]
    for name in names:
        shutil.copytree(CAPTURED / name, tmp_path / "runs" / name)
    return [tmp_path / "runs" / name for name in names]


def test_a_failing_gate_run_re_marked_all_pass_and_re_hashed_is_not_accepted(tmp_path, capsys):
    """Review proof a4: every outcome of a failing `gate all` run set to pass (its manifest made again) gave an
    ACCEPTED, signed, VERIFIED report with 'PASS soak duration 0.0066 h >= 72 h'."""
    runs = captured_copy(tmp_path)
    gate = tmp_path / "runs" / "09-gate-all-buyer-s-thresholds"
    honest = build_report(runs, tmp_path / "honest")
    assert [h.decision for h in honest.headlines] == [Decision.NOT_ACCEPTED] and honest.headlines[0].untied == ()
    data = results_of(gate)
    for verdict in data["gates"]:
        verdict["outcome"] = "pass"
        for criterion in verdict["criteria"]:
            criterion["outcome"] = "pass"
    rewritten(gate, {**data, "outcome": "pass"})
    built = build_report(runs, tmp_path / "rep")
    (head,) = built.headlines
    assert head.decision is Decision.INCOMPLETE, head.lines()
    g4 = next(g for g in head.gates if g.gate.startswith("G4"))
    assert g4.outcome is Outcome.ERROR and "REFUSED: recorded as PASS" in g4.line()
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "ACCEPTED" not in md.replace("NOT ACCEPTED", "") and "| PASS | soak duration |" not in md
    assert "| ERROR | soak duration | 0.0088 h | >= 72 h |" in md and "REFUSED: recorded as PASS" in md
    assert "- NOT WHAT ITS EVIDENCE GIVES: G4 stability and sign-off: soak duration: recorded ERROR 0.0088 h, judged " \
           "again from its evidence FAIL 0.0088 h" in md
    assert [h.decision for h in bundle_headlines(tmp_path / "rep")] == [Decision.INCOMPLETE]


def lab_gate(tmp_path: Path) -> tuple[list[Path], Path]:
    from test_lab_scaled import lab_scaled_evidence
    paths, lab_file = lab_scaled_evidence(tmp_path / "ev")
    assert fxprobe(tmp_path, "gate", "all", *[a for p in paths for a in ("--evidence", str(p))],
                   "--config", str(lab_file)) == 0
    gate = runs_of(tmp_path, "gate all")[-1]
    recorded = results_of(gate)["evidence_runs"]
    assert [e["name"] for e in recorded] == [p.name for p in paths]
    assert all(len(e["manifest_sha256"]) == 64 for e in recorded)
    return paths, gate


def test_a_gate_run_s_evidence_missing_from_the_report_or_another_is_never_a_pass(tmp_path):
    paths, gate = lab_gate(tmp_path)
    honest = build_report([*paths, gate], tmp_path / "honest")
    assert [h.decision for h in honest.headlines] == [Decision.LAB_PASS], honest.lines()
    soak = next(p for p in paths if p.name.endswith("-soak"))
    left_out = build_report([p for p in paths if p != soak] + [gate], tmp_path / "without-soak")
    (head,) = left_out.headlines
    assert head.decision is Decision.INCOMPLETE and len(head.untied) == 1
    assert head.untied[0].startswith(f"{soak.name} (manifest SHA-256 ") and head.untied[0].endswith("not in this report")
    assert f"EVIDENCE NOT IN THIS REPORT: {soak.name}" in "\n".join(left_out.lines())
    # another soak folder of the same name (re-written and re-hashed after the gates judged it)
    data = results_of(soak)
    rewritten(soak, {**data, "duration_s": data["duration_s"] + 1})
    (head,) = build_report([*paths, gate], tmp_path / "other-soak").headlines
    assert head.decision is Decision.INCOMPLETE and "not as the gate read it (another manifest)" in head.untied[0]
    assert json.loads((tmp_path / "other-soak" / "evidence" / gate.name / "results.json").read_text())["outcome"] == "pass"


def test_a_gate_run_re_marked_pass_with_matching_figures_is_judged_again_from_its_evidence(tmp_path):
    """Manifests are hashes, not signatures: a failing criterion rewritten as a consistent PASS (its number moved
    past the threshold, the manifest made again) agrees with itself, but not with the line-efficiency run beside
    it: the report judges the gate run again over its evidence and is never a pass (its honest twin: LAB_PASS)."""
    paths, _ = lab_gate(tmp_path / "honest")
    line = next(p for p in paths if p.name.endswith("-line-efficiency"))
    data = results_of(line)
    rewritten(line, {**data, "summary": {**data["summary"], "mean_bps": 0.01e9}})    # the stress test: 50 %
    assert fxprobe(tmp_path, "gate", "all", *[a for p in paths for a in ("--evidence", str(p))],
                   "--config", str(tmp_path / "honest" / "ev" / "trusting" / "gates-lab.toml")) == 1
    gate = runs_of(tmp_path, "gate all")[-1]
    (failed,) = build_report([*paths, gate], tmp_path / "failed").headlines
    assert failed.decision is Decision.NOT_ACCEPTED and failed.differs == ()      # the gate run as it was made
    data = results_of(gate)
    (g2,) = [v for v in data["gates"] if v["name"].startswith("G2")]
    (bent,) = [c for c in g2["criteria"] if c["outcome"] == "fail"]
    assert bent["measured"] == 50.0 and bent["comparator"] == ">="
    bent.update(measured=bent["threshold"] + 1, outcome="pass")          # consistent with its own threshold
    g2["outcome"] = "pass"
    rewritten(gate, {**data, "outcome": "pass"})
    built = build_report([*paths, gate], tmp_path / "rep")
    (head,) = built.headlines
    assert head.decision is Decision.INCOMPLETE, head.lines()
    assert head.differs == (f"G2 single-node baseline (gates-lab): {bent['name']}: recorded PASS "
                            f"{bent['threshold'] + 1:.1f} %, judged again from its evidence FAIL 50.0 %",)
    md = (tmp_path / "rep" / "report.md").read_text()
    assert f"- NOT WHAT ITS EVIDENCE GIVES: {head.differs[0]}" in md
    assert [h.decision for h in bundle_headlines(tmp_path / "rep")] == [Decision.INCOMPLETE]
