"""`fxprobe rehearse` against the session lab: every step leaves evidence, the report verifies,
and the gate table printed is the one the evidence gives."""

from __future__ import annotations

import json

import pytest

from fxprobe.cli.main import main

pytestmark = pytest.mark.lab


def test_rehearse_writes_a_signed_report_whose_gates_match_the_evidence(lab, tmp_path, capsys):
    run_dir = tmp_path / "rehearse"
    code = main(["--run-dir", str(run_dir), "rehearse", "--lab", lab.name, "--soak", "30"])
    out = capsys.readouterr()
    results = json.loads((run_dir / "results.json").read_text())
    failed = [s for s in results["steps"] if not s["produced"]]
    assert code == 0 and not failed, (failed, out.err[-3000:])
    steps = {s["name"]: s for s in results["steps"]}
    gates = json.loads((run_dir / "steps" / [p for p in (run_dir / "steps").iterdir() if "gate" in p.name][0].name
                        / "results.json").read_text())
    table = {g["name"]: g["outcome"].upper() for g in gates["gates"]}
    printed = {line[:28].strip(): line[29:37].strip() for line in results["gate_table"]}
    report = run_dir / "report"
    md = (report / "report.md").read_text().split("## Gate table", 1)[1].split("\n\n")[1].splitlines()[2:]
    in_report = {row.split(" | ")[0].lstrip("| "): row.split(" | ")[1] for row in md}
    assert printed == table == in_report, (printed, table, in_report)
    assert table["G1 delivery acceptance"] == "PASS" and len(table) == 4
    assert table["G4 stability and sign-off"] == "FAIL"          # a 30 s soak is not 72 h
    assert (report / "report.html").exists()
    assert all("/" not in s["run_dir"].split("/steps/")[1] for s in results["steps"])
    assert main(["--run-dir", str(tmp_path / "verify"), "report", "verify", str(report)]) == 0
    assert steps["selftest"]["exit_code"] == 0
