"""Lab-scaled thresholds never mixed with the buyer's: the same evidence (run folders the real producers wrote in
a lab rehearsal, tests/fixtures/report/rehearsal) judged with gates.toml and with gates-lab.toml, side by side;
the rehearsal's gate, sign and report steps run through the library, and its JUnit counts equal both tables."""

from __future__ import annotations

import shutil
from pathlib import Path
from xml.etree import ElementTree

from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome
from fxprobe.gates import Evidence, evaluate_all, load_config
from fxprobe.gates.config import LAB_FILE
from fxprobe.lab.rehearse import Rehearse, Step

ROOT = Path(__file__).parent.parent
CAPTURED = Path(__file__).parent / "fixtures" / "report" / "rehearsal"
STEPS = [p for p in sorted(CAPTURED.iterdir()) if "gate" not in p.name and "verify" not in p.name]


def by_name(verdicts) -> dict:
    return {c.name: c for v in verdicts for c in v.criteria} | {v.name: v for v in verdicts}


def test_the_buyer_s_thresholds_fail_where_the_lab_must_and_the_lab_scaled_pass():
    evidence = Evidence.from_paths(STEPS)
    buyer = by_name(evaluate_all(evidence, load_config(ROOT / "gates.toml")))
    lab = by_name(evaluate_all(evidence, load_config(LAB_FILE)))
    rate = "line efficiency vs the gate's line rate"
    assert buyer[rate].outcome is Outcome.FAIL and "line rate 100 Gb/s" in buyer[rate].detail
    assert lab[rate].outcome is Outcome.PASS and "line rate 0.02 Gb/s" in lab[rate].detail
    assert buyer["nodes sharing one array"].outcome is Outcome.FAIL and "need >= 8" in buyer["nodes sharing one array"].line()
    assert lab["nodes sharing one array"].outcome is Outcome.PASS and "need >= 2" in lab["nodes sharing one array"].line()
    assert buyer["soak duration"].outcome is Outcome.FAIL and "need >= 72 h" in buyer["soak duration"].line()
    assert lab["soak duration"].outcome is Outcome.PASS and "need >= 0.005 h" in lab["soak duration"].line()
    assert "G1 delivery acceptance (gates-lab)" in lab and "G1 delivery acceptance" in buyer   # never mistaken


def test_rehearse_judges_twice_through_the_library_and_junit_counts_equal_both_tables(tmp_path):
    base = tmp_path / "rehearse"
    RunDir.start("rehearse", ["fxprobe", "rehearse"], path=base)
    rehearse = Rehearse(Runner(None), base, lambda text: None, None, config=ROOT / "gates.toml")
    for index, source in enumerate(STEPS, 1):
        target = base / "steps" / f"{index:02d}-{source.name.split('-', 1)[1]}"
        shutil.copytree(source, target)
        rehearse.result.steps.append(Step(source.name, "G?", target, 0, run_outcome="?"))
    rehearse.gates_and_report()
    steps = {s.name: s for s in rehearse.result.steps}
    assert steps["report verify"].code == 0                  # pinned: the rehearsal's own public key
    assert all(s.produced and not s.error for s in rehearse.result.steps), [s.to_dict() for s in rehearse.result.steps]
    table = rehearse.result.side_by_side()
    assert "buyer gates.toml" in table[0] and "gates-lab.toml" in table[0] and len(table) == 5
    assert table[2].split("|")[0].strip().startswith("G2 single-node baseline") and "FAIL" in table[2].split("|")[0]
    assert "(gates-lab)" in table[2].split("|")[1]
    gate_runs = [steps[name].run_dir for name in ("gate all (buyer's thresholds)", "gate all (lab-scaled)")]
    tables = [RunDir.open(p).results()["gates"] for p in gate_runs]
    junit = ElementTree.parse(rehearse.result.report / "junit.xml").getroot()
    suites = {s.get("name"): s for s in junit.findall("testsuite")}
    for gates in tables:
        for gate in gates:
            suite = suites.get(gate["name"]) or suites[f"{gate['name']} (gates)"]
            outcomes = [c["outcome"] for c in gate["criteria"]]
            assert int(suite.get("tests")) == len(outcomes)
            assert int(suite.get("failures")) == outcomes.count("fail") + outcomes.count("not run")
            assert int(suite.get("errors")) == outcomes.count("error")
    assert len(suites) == 4 + 4 + 1                           # buyer's gates, lab-scaled gates, steps
    assert not (base / "joint-test-report" / "runs").exists()
