"""`fxprobe rehearse` against the session lab: every step leaves evidence, the report verifies,
and the gate table printed is the one the evidence gives."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from fxprobe.cli.main import main
from labcli import scenario_file

pytestmark = pytest.mark.lab

# the shipped scenarios with shorter windows (31 s and 48 s of load -> 12 s and 14 s; the tuned timeouts fail over
# within ~2 s): the rehearsal's plumbing, not the faults' verdicts, is what this test checks (test_fault_lab and
# test_lab_verify judge those)
SHORT = {"drive-pull": {"steady_s": 4, "settle_s": 1, "fault_s": 4, "recover_s": 3},
         "link-down-tuned": {"steady_s": 4, "settle_s": 1, "fault_s": 6, "recover_s": 3}}


# judges no time: every step's evidence, and the tables printed = the evidence = the report; what the lab-scaled gates
# decide (throughput, stalls) is not asserted here, so it runs beside another lab (scripts/test's part 2)
@pytest.mark.lab_parallel
def test_rehearse_writes_a_signed_report_whose_gates_match_the_evidence(lab, tmp_path, capsys):
    run_dir = tmp_path / "rehearse"
    faults = [str(scenario_file(tmp_path, name, timing=timing, load={"region": "2M"})) for name, timing in SHORT.items()]
    code = main(["--run-dir", str(run_dir), "rehearse", "--lab", lab.name, "--soak", "20",
                 *[a for f in faults for a in ("--fault", f)]])
    out = capsys.readouterr()
    results = json.loads((run_dir / "results.json").read_text())
    failed = [s for s in results["steps"] if not s["produced"]]
    assert code == 0 and not failed, (failed, out.err[-3000:])
    steps = {s["name"]: s for s in results["steps"]}
    tables, gates_judged = {}, []
    for name in ("gate all (buyer's thresholds)", "gate all (lab-scaled)"):
        gates = json.loads((Path(steps[name]["run_dir"]) / "results.json").read_text())
        tables.update({g["name"]: g["outcome"].upper() for g in gates["gates"]})
        gates_judged += gates["gates"]
    printed = {line[:40].strip(): line[41:49].strip() for line in results["gate_table"] + results["lab_gate_table"]}
    rows = [line[2:].split(" | ", 1) for line in out.out.splitlines() if line.startswith("  G") and " | " in line]
    terminal = {side[:40].strip(): side[41:49].strip() for row in rows for side in row}   # the two tables printed
    assert terminal == printed, (terminal, printed)
    report = run_dir / "report"
    md = (report / "report.md").read_text().split("## Gate table", 1)[1].split("\n\n")[1].splitlines()[2:]
    in_report = {row.split(" | ")[0].lstrip("| "): row.split(" | ")[1] for row in md}
    assert printed == tables == in_report, (printed, tables, in_report)
    junit = {s.get("name"): s for s in ElementTree.parse(report / "junit.xml").getroot().findall("testsuite")}
    for gate in gates_judged:        # JUnit counts equal each gate's criteria; what was not judged is skipped
        suite = junit.get(gate["name"]) or junit[f"{gate['name']} (gates)"]
        outcomes = [c["outcome"] for c in gate["criteria"]]
        counts = [int(suite.get(k)) for k in ("tests", "failures", "errors", "skipped")]
        assert counts == [len(outcomes) + len(gate.get("not_judged", [])), outcomes.count("fail") +
                          outcomes.count("not run"), outcomes.count("error"), len(gate.get("not_judged", []))]
    assert tables["G1 delivery acceptance (gates-lab)"] == "PASS" and len(tables) == 8
    # the buyer's thresholds fail where the lab must, each with its reason
    buyer = {line[:40].strip(): line for line in results["gate_table"]}
    assert "FAIL" in buyer["G1 delivery acceptance"] and "drives without spare accounting" in buyer[
        "G1 delivery acceptance"]                                  # QEMU's drives report 0 % spare, threshold 0 %
    assert "FAIL" in buyer["G2 single-node baseline"] and "line efficiency vs the gate's line rate" in buyer[
        "G2 single-node baseline"]                                 # 20 Mb/s is not 100 GbE
    assert "FAIL" in buyer["G3 main joint test"] and "nodes sharing one array" in buyer["G3 main joint test"]
    assert "FAIL" in buyer["G4 stability and sign-off"] and "soak duration" in buyer["G4 stability and sign-off"]
    # the lab scale judges what the lab produces, prints what it scaled and what it left out, and why
    lab = {line[:40].strip(): line for line in results["lab_gate_table"]}
    for gate in ("G2 single-node baseline (gates-lab)", "G3 main joint test (gates-lab)"):
        assert "1 not judged at lab scale" in lab[gate] and "not run" not in lab[gate], lab[gate]
    for gate in gates_judged:    # every G2-G4 run measured the lab's array guest: named by its ports, or agreed on
        rows = [c for c in gate["criteria"] if c["name"].startswith("measured the array under acceptance")]
        assert bool(rows) != gate["name"].startswith("G1") and all(c["outcome"] == "pass" for c in rows), rows
        named = "(gates-lab)" in gate["name"]
        assert all(("the array named in [array] (lab " in c["threshold"]) == named for c in rows), rows
    assert "gates-lab.toml" in out.out and "|" in out.out         # the two tables side by side on the terminal
    for line in results["lab_scale"]:
        assert line in out.out and (line.startswith(("SCALED", "NOT JUDGED", "LAB-SCALED")))
    assert sum(line.startswith("SCALED") for line in results["lab_scale"]) == 9
    assert (report / "report.html").exists()
    assert all("/" not in s["run_dir"].split("/steps/")[1] for s in results["steps"])
    assert main(["--run-dir", str(tmp_path / "verify"), "report", "verify", str(report),
                 "--public-key", str(run_dir / "signing" / "fxprobe-signing.pub")]) == 0
    assert steps["selftest"]["exit_code"] == 0 and steps["report verify"]["exit_code"] == 0
    g3 = json.loads((Path(steps["multi-node read-back"]["run_dir"]) / "results.json").read_text())["workload"]
    assert g3["node_kinds"] == {h: "ssh" for h in g3["nodes"]} and len(g3["nodes"]) >= 2   # as `fxprobe run` records
    assert [n for n in steps if n.startswith("fault ")] == ["fault drive-pull", "fault link-down-tuned"]
    for name, timing in SHORT.items():       # the scenarios given are the ones run, and their evidence says so
        fault = json.loads((Path(steps[f"fault {name}"]["run_dir"]) / "results.json").read_text())
        assert {k: fault["scenario"]["timing"][k] for k in timing} == timing, fault["scenario"]
