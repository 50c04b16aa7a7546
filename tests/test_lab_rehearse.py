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
    table = {g["name"]: g["outcome"] for g in gates["gates"]}
    for name, outcome in table.items():
        assert any(line.startswith(name) and line.rstrip().endswith(outcome.upper()) for line in results["gate_table"])
    assert "G1" in " ".join(table) and len(table) == 4
    report = run_dir / "report"
    assert (report / "report.html").exists()
    assert main(["--run-dir", str(tmp_path / "verify"), "report", "verify", str(report)]) == 0
    assert steps["selftest"]["exit_code"] == 0
