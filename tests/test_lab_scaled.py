"""Lab-scaled thresholds never mixed with the buyer's: the same evidence (run folders the real producers wrote in
a lab rehearsal, tests/fixtures/report/rehearsal) judged with gates.toml and with gates-lab.toml, side by side;
the rehearsal's gate, sign and report steps run through the library, and its JUnit counts equal both tables."""

from __future__ import annotations

import shutil
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import RunDir
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, evaluate_all, load_config
from fxprobe.gates.config import BUYER, JUDGED_TOGETHER, LAB_FILE, THRESHOLD_KEYS, parse_config
from fxprobe.lab.rehearse import Rehearse, Step
from gate_helpers import (fake_run, fxprobe, produced_fault, produced_multi_node, produced_selftest, runs_of,
                          signed_verification)

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
    # at lab scale every criterion over the rehearsal's steps passes (G4's fault seen and soak clock among them)
    # but the signed report's: NOT RUN, its verification step is not among these steps
    g4 = lab["G4 stability and sign-off (gates-lab)"]
    assert [c.name for c in g4.criteria if c.outcome is not Outcome.PASS] == ["signed joint-test report verified"]
    assert lab["signed joint-test report verified"].outcome is Outcome.NOT_RUN
    assert {"drive pull: fault seen in its window", "link cut: fault seen in its window",
            "soak covered time on the monotonic clock"} <= {c.name for c in g4.criteria}
    assert all(lab[name].outcome is Outcome.PASS for name in ("G1 delivery acceptance (gates-lab)",
               "G2 single-node baseline (gates-lab)", "G3 main joint test (gates-lab)"))


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
    signed = [c for gates in tables for g in gates if g["name"].startswith("G4") for c in g["criteria"]
              if c["name"] == "signed joint-test report verified"]       # the buyer names no signer; the lab its own
    assert [c["outcome"] for c in signed] == ["not run", "pass"], signed
    assert "no trusted signer configured" in signed[0]["detail"] and "carries the soak 04-soak" in signed[1]["detail"]
    junit = ElementTree.parse(rehearse.result.report / "junit.xml").getroot()
    suites = {s.get("name"): s for s in junit.findall("testsuite")}
    for gates in tables:
        for gate in gates:
            suite = suites.get(gate["name"]) or suites[f"{gate['name']} (gates)"]
            outcomes = [c["outcome"] for c in gate["criteria"]]
            left_out = gate.get("not_judged", [])            # skipped, each saying why: not judged at lab scale
            assert int(suite.get("tests")) == len(outcomes) + len(left_out)
            assert int(suite.get("failures")) == outcomes.count("fail") + outcomes.count("not run")
            assert int(suite.get("errors")) == outcomes.count("error")
            assert int(suite.get("skipped")) == len(left_out)
    assert len(suites) == 4 + 4 + 1                           # buyer's gates, lab-scaled gates, steps
    assert not (base / "joint-test-report" / "runs").exists()


# -- the validation layer: only a file declared lab-scaled departs from the buyer's thresholds, never silently ------
LAB_HEAD = '[scale]\nlab_scaled = true\nwhy = "a lab"\n'


@pytest.mark.parametrize("text, words", [
    # a buyer's (or a vendor's) gates.toml cannot drop a criterion or scale a value with a reason
    ('[scale.not_judged]\n"g2.baseline_tolerance_pct" = "no inference here"\n',
     "field 'scale.not_judged': criteria left out (g2.baseline_tolerance_pct) only in a lab-scaled file"),
    ('[scale]\nlab_scaled = false\n[scale.not_judged]\n"g3.ttft_reduction_min_pct" = "x"\n',
     "field 'scale.not_judged': criteria left out (g3.ttft_reduction_min_pct) only in a lab-scaled file"),
    ('[g4]\nsoak_hours_min = 1.0\n[scale.scaled]\n"g4.soak_hours_min" = "short"\n',
     "field 'scale.scaled': scaled thresholds (g4.soak_hours_min) only in a lab-scaled file"),
    # a lab-scaled file names every departure, and only departures
    (LAB_HEAD + '[g4]\nsoak_hours_min = 1.0\n',
     "field 'scale': g4.soak_hours_min = 1 differs from the buyer's 72 with no reason in [scale.scaled]"),
    (LAB_HEAD + '[scale.scaled]\n"g1.drives_expected" = "24 drives"\n',
     "field 'scale': g1.drives_expected is listed as scaled but keeps the buyer's 24"),
    (LAB_HEAD + '[g2]\nbaseline_tolerance_pct = 100.0\n[scale.not_judged]\n"g2.baseline_tolerance_pct" = "x"\n',
     "field 'scale': g2.baseline_tolerance_pct is not judged here: keep the buyer's value (10), not 100"),
    (LAB_HEAD + '[scale.not_judged]\n"g3.ttft_reduction_min_pct" = "x"\n',
     "field 'scale.not_judged': g3.ttft_reduction_min_pct is judged together with g3.throughput_gain_min_pct, "
     "g3.throughput_gain_max_pct in one criterion: leave all of them out or none"),
    (LAB_HEAD + '[scale.not_judged]\n"g4.trusted_signers" = "x"\n', "g4.trusted_signers: not a threshold"),
    (LAB_HEAD + '[scale.scaled]\n"g2.line_rate_gbps" = ""\n', "field 'scale.scaled.g2.line_rate_gbps': must not be empty"),
    ('[scale]\nlab_scaled = true\n', "field 'scale.why': a lab-scaled file says what its scale is for"),
    # a bad value in a scaled gate's table is that field's error alone, not also its scale's
    (LAB_HEAD + '[g4]\nsoak_hours_min = nan\n[scale.scaled]\n"g4.soak_hours_min" = "short"\n',
     "field 'g4.soak_hours_min': must be a finite number (got nan)"),
])
def test_a_criterion_is_dropped_or_a_value_scaled_only_in_a_declared_lab_scaled_file(text, words):
    with pytest.raises(BadInput) as info:
        parse_config(text, "mine.toml")
    assert str(info.value).startswith("mine.toml: ") and words in str(info.value), str(info.value)
    assert "more:" not in str(info.value), str(info.value)


def test_a_buyer_s_config_that_drops_a_criterion_is_one_line_exit_2(tmp_path, capsys):
    config = tmp_path / "gates.toml"
    config.write_text('[scale.not_judged]\n"g2.baseline_tolerance_pct" = "we have no benchmark"\n')
    assert fxprobe(tmp_path, "gate", "all", "--config", str(config)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "gates.toml: field 'scale.not_judged'" in err[0] and "Traceback" not in err[0]


def test_the_shipped_lab_scale_names_each_departure_and_the_units_it_leaves_out_are_whole():
    lab = load_config(LAB_FILE)
    assert lab.lab_scaled and lab.label == "gates-lab" and not load_config(ROOT / "gates.toml").lab_scaled
    departures = {name for name in THRESHOLD_KEYS if lab.get(*name.split(".")) != BUYER[name]}
    assert departures == set(lab.scale["scaled"]) == {"g1.spare_unaccounted_max", "g2.line_rate_gbps", "g3.nodes_sharing",
                                                      "g3.nic_ceiling_min_pct", "g4.soak_hours_min",
                                                      "g4.fault_stall_max_s", "g4.fault_window_min_s",
                                                      "g4.fault_recover_min_s", "g4.fault_region_min_mib"}
    # every criterion reading several thresholds is one JUDGED_TOGETHER group (left out whole or not at all)
    groups = {tuple(f"{key}.{k}" for k in unit.keys) for key, gate in GATES.items() for unit in gate.units()
              if len(unit.keys) > 1}
    assert groups == set(JUDGED_TOGETHER)
    for key, gate in GATES.items():
        left_out = [unit.title for unit in gate.units() if lab.not_judged(key, unit.keys)]
        assert left_out == {"g2": ["baseline within reference"], "g3": ["TTFT reduction and throughput gain"]}.get(key, [])


VERIFIED = {"name": "data verified (mismatches)", "outcome": "pass", "measured": 0, "threshold": 0, "comparator": "<=",
            "detail": "0 mismatches over 0.100 GiB (fio verify=crc32c)"}


def lab_scaled_evidence(base: Path) -> tuple[list[Path], Path]:
    """Evidence that meets the lab-scaled thresholds and not the buyer's (no inference benchmarks at all), the soak
    and fault runs in a signed joint-test report verified; and gates-lab.toml trusting its signer (a copy)."""
    paths = [
        fake_run(base, "selftest", produced_selftest(24, emulated=True)),   # QEMU's drives: no spare accounting
        fake_run(base, "line-efficiency", {"summary": {"line_efficiency": 0.96, "mean_bps": 0.0192e9},
                                           "port_speed_bps": 0.02e9, "interface": "l1"}),
        fake_run(base, "run", produced_multi_node(2, 0.004)),
        fake_run(base, "soak", {"duration_s": 30.5, "interruptions": [], "stall_s": 5.0, "coverage_clock": "monotonic", "verdict": {"name": "soak", "criteria": [
            VERIFIED]}}),
        fake_run(base, "fault run", produced_fault("drive-pull", stall_s=0.0, throughput_pct=61.0)),
        fake_run(base, "fault run", produced_fault("link-down", stall_s=4.2, throughput_pct=78.0, verdict="visible",
                                                   scenario="link-down-tuned"), "fail"),
    ]
    verify_run, signer = signed_verification(Path(base) / "signing", paths[-3:])
    lab_file = Path(base) / "trusting" / "gates-lab.toml"
    lab_file.parent.mkdir(parents=True)
    lab_file.write_text(LAB_FILE.read_text().replace("trusted_signers = []", f'trusted_signers = ["{signer}"]', 1))
    assert load_config(lab_file).trusted_signers() == (signer,)
    return paths + [verify_run], lab_file


def test_every_gate_passes_at_lab_scale_printing_what_it_scaled_and_left_out_while_the_buyer_s_fail(tmp_path, capsys):
    paths, lab_file = lab_scaled_evidence(tmp_path / "ev")
    evidence = Evidence.from_paths(paths)
    buyer = {v.name: v for v in evaluate_all(evidence, load_config(ROOT / "gates.toml"))}
    lab = {v.name: v for v in evaluate_all(evidence, load_config(lab_file))}
    assert {name: v.outcome for name, v in lab.items()} == {
        f"{g} (gates-lab)": Outcome.PASS for g in ("G1 delivery acceptance", "G2 single-node baseline",
                                                   "G3 main joint test", "G4 stability and sign-off")}
    assert [v.outcome for v in buyer.values()] == [Outcome.FAIL, Outcome.FAIL, Outcome.FAIL, Outcome.FAIL]
    unaccounted = {c.name: c for c in buyer["G1 delivery acceptance"].criteria}["drives without spare accounting"]
    assert unaccounted.outcome is Outcome.FAIL and "need <= 0" in unaccounted.line()     # emulated: the buyer's fail
    assert "SCALED g1.spare_unaccounted_max = 24 (the buyer's 0): QEMU's emulated NVMe drives" in \
        {c.name: c for c in lab["G1 delivery acceptance (gates-lab)"].criteria}["drives without spare accounting"].detail
    stall = {c.name: c for c in buyer["G4 stability and sign-off"].criteria}["link cut: longest stall (no completed I/O)"]
    assert stall.outcome is Outcome.FAIL and "need <= 2 s" in stall.line()
    lab_stall = {c.name: c for c in lab["G4 stability and sign-off (gates-lab)"].criteria}[stall.name]
    assert lab_stall.outcome is Outcome.PASS and "SCALED g4.fault_stall_max_s = 5 (the buyer's 2): " in lab_stall.detail
    g2 = lab["G2 single-node baseline (gates-lab)"]
    assert [n.line() for n in g2.not_judged] == [
        "NOT JUDGED baseline within reference (g2.baseline_tolerance_pct): not judged at lab scale: "
        + load_config(lab_file).scale["not_judged"]["g2.baseline_tolerance_pct"]]
    assert "baseline within reference" in {c.name for c in buyer["G2 single-node baseline"].criteria}   # NOT RUN there
    # terminal (gate all), report and JUnit say the same
    args = [a for p in paths for a in ("--evidence", str(p))]
    assert fxprobe(tmp_path, "gate", "all", *args, "--config", str(lab_file)) == 0
    out = capsys.readouterr().out
    assert "G2 single-node baseline (gates-lab)      PASS     3 pass, 1 not judged at lab scale" in out
    assert "NOT JUDGED TTFT reduction and throughput gain (g3.ttft_reduction_min_pct, g3.throughput_gain_min_pct, " \
           "g3.throughput_gain_max_pct): not judged at lab scale: " in out
    assert out.count("SCALED g4.fault_stall_max_s = 5 (the buyer's 2)") == 2           # drive pull and link cut
    gate_run = runs_of(tmp_path, "gate all")[-1]
    assert fxprobe(tmp_path, "report", *map(str, paths), str(gate_run), "--out", str(tmp_path / "r")) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert "**PASSED AT LAB SCALE** - judged with the lab-scaled thresholds" in md and "ACCEPTED" not in md
    assert "not the buyer's: 9 thresholds SCALED, 4 NOT JUDGED at lab scale" in md
    assert "| NOT JUDGED | baseline within reference |  |  |  | not judged at lab scale (g2.baseline_tolerance_pct): " in md
    assert "| `g4.fault_stall_max_s` | 5 SCALED |" in md
    assert "SCALED g2.line_rate_gbps = 0.02 (the buyer's 100): the lab's emulated data link" in md
    junit = ElementTree.parse(tmp_path / "r" / "junit.xml").getroot()
    g3 = next(s for s in junit.findall("testsuite") if s.get("name") == "G3 main joint test (gates-lab)")
    assert (g3.get("tests"), g3.get("failures"), g3.get("skipped")) == ("4", "0", "1")   # + the array measured
    skipped = [c for c in g3.findall("testcase") if c.find("skipped") is not None]
    assert [c.get("name") for c in skipped] == ["G3 / TTFT reduction and throughput gain"]
    assert "not judged at lab scale: TTFT reduction" in skipped[0].find("skipped").get("message")
    nodes = next(c for c in g3.findall("testcase") if c.get("name") == "G3 / nodes sharing one array")
    assert "SCALED g3.nodes_sharing = 2 (the buyer's 8)" in nodes.find("system-out").text


def test_a_lab_scaled_file_is_never_printed_as_the_buyer_s_and_a_gate_with_nothing_judged_is_not_run(tmp_path):
    """A lab-scaled file named gates.toml still names its tables lab-scaled; left out entirely, a gate is NOT RUN."""
    text = (LAB_HEAD + '[scale.not_judged]\n"g1.drives_expected" = "no array here"\n')
    config = parse_config(text, str(tmp_path / "gates.toml"))
    assert config.label == "lab-scaled"
    verdict = GATES["g1"].evaluate(Evidence.from_paths([fake_run(tmp_path, "selftest", produced_selftest(3))]),
                                   config)
    assert verdict.name == "G1 delivery acceptance (lab-scaled)" and verdict.outcome is Outcome.PASS  # self-test passed
    bare = parse_config(text, "gates.toml")
    nothing = GATES["g2"].evaluate(Evidence(), parse_config(
        LAB_HEAD + '[scale.not_judged]\n"g2.baseline_tolerance_pct" = "a"\n"g2.line_efficiency_min_pct" = "b"\n'
        '"g2.line_rate_gbps" = "b"\n', "gates.toml"))
    assert nothing.criteria == () and nothing.outcome is Outcome.NOT_RUN and len(nothing.not_judged) == 2
    assert bare.to_dict()["lab_scaled"] is True and bare.to_dict()["notes"][0].startswith("LAB-SCALED thresholds")
