"""`fxprobe rehearse` against the session lab: every step leaves evidence, the report verifies,
and the gate table printed is the one the evidence gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxprobe.cli.main import main

pytestmark = pytest.mark.lab


def test_rehearse_writes_a_signed_report_whose_gates_match_the_evidence(lab, tmp_path, capsys):
    run_dir = tmp_path / "rehearse"
    code = main(["--run-dir", str(run_dir), "rehearse", "--lab", lab.name, "--soak", "20"])
    out = capsys.readouterr()
    results = json.loads((run_dir / "results.json").read_text())
    failed = [s for s in results["steps"] if not s["produced"]]
    assert code == 0 and not failed, (failed, out.err[-3000:])
    steps = {s["name"]: s for s in results["steps"]}
    tables = {}
    for name in ("gate all (buyer's thresholds)", "gate all (lab-scaled)"):
        gates = json.loads((Path(steps[name]["run_dir"]) / "results.json").read_text())
        tables.update({g["name"]: g["outcome"].upper() for g in gates["gates"]})
    printed = {line[:40].strip(): line[41:49].strip() for line in results["gate_table"] + results["lab_gate_table"]}
    report = run_dir / "report"
    md = (report / "report.md").read_text().split("## Gate table", 1)[1].split("\n\n")[1].splitlines()[2:]
    in_report = {row.split(" | ")[0].lstrip("| "): row.split(" | ")[1] for row in md}
    assert printed == tables == in_report, (printed, tables, in_report)
    assert tables["G1 delivery acceptance"] == "PASS" and len(tables) == 8
    assert tables["G4 stability and sign-off"] == "FAIL"          # a 20 s soak is not 72 h
    assert tables["G2 single-node baseline"] == "FAIL"            # 20 Mb/s is not 100 GbE
    assert "gates-lab.toml" in out.out and "|" in out.out         # the two tables side by side on the terminal
    assert (report / "report.html").exists()
    assert all("/" not in s["run_dir"].split("/steps/")[1] for s in results["steps"])
    assert main(["--run-dir", str(tmp_path / "verify"), "report", "verify", str(report),
                 "--public-key", str(run_dir / "signing" / "fxprobe-signing.pub")]) == 0
    assert steps["selftest"]["exit_code"] == 0 and steps["report verify"]["exit_code"] == 0
