"""JUnit a CI can trust: one testcase per gate criterion with a stable name, counts equal to the gate table,
NOT RUN and ERROR never green, step verdicts in their own suite, time and timestamp; valid against the XSD."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from gate_helpers import fake_run, fxprobe, produced_fault, results_of, runs_of

XSD = Path(__file__).parent / "fixtures" / "junit" / "junit.xsd"


def selftest(base, outcome="pass"):
    criteria = [{"name": "drives recognized", "outcome": outcome, "measured": 24, "threshold": 24,
                 "comparator": ">=", "places": 0}]
    return fake_run(base, "selftest", {"drives_recognized": 24, "verdict": {"name": "selftest", "criteria": criteria}},
                    outcome=outcome)


def evidence(base, link_errors=0) -> list[Path]:
    """G1 and G4 evidence of a lab-like joint test; G2 and G3 never ran."""
    fault = {"criteria": [{"name": "I/O errors", "outcome": "pass" if not link_errors else "fail",
                           "measured": link_errors, "threshold": 0, "comparator": "<="}]}
    return [
        selftest(base),
        fake_run(base, "soak", {"duration_s": 60.0, "interruptions": [], "stall_s": 5.0, "coverage_clock": "monotonic",
                                "verdict": {"name": "soak", "criteria": [{"name": "interruptions", "outcome": "pass",
                                                                          "measured": 0, "threshold": 0}]}}),
        fake_run(base, "fault run", {**produced_fault("link-down", errors=link_errors, scenario="link-down"),
                                     **fault}, outcome="pass" if not link_errors else "fail"),
    ]


def report(tmp_path: Path, name: str, paths: list[Path], *extra: str) -> tuple[ElementTree.Element, dict]:
    fxprobe(tmp_path, "gate", "all", *[a for p in paths for a in ("--evidence", str(p))])
    gate_run = runs_of(tmp_path, "gate all")[-1]
    out = tmp_path / name
    assert fxprobe(tmp_path, "report", *map(str, paths), str(gate_run), "--out", str(out), *extra) == 0
    return ElementTree.parse(out / "junit.xml").getroot(), results_of(gate_run)


def cases(suite) -> dict[str, str]:
    out = {}
    for case in suite.findall("testcase"):
        tags = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[case.get("name")] = tags[0] if tags else "pass"
    return out


def test_counts_equal_the_gate_table_and_not_run_is_not_green(tmp_path):
    root, gates = report(tmp_path, "r1", evidence(tmp_path / "ev"))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    gate_suites = [s for name, s in suites.items() if name != "steps"]
    assert [s.get("name") for s in gate_suites] == [f"{g['name']} (gates)" for g in gates["gates"]]
    for suite, gate in zip(gate_suites, gates["gates"]):
        outcomes = [c["outcome"] for c in gate["criteria"]]
        assert int(suite.get("tests")) == len(outcomes) == len(suite.findall("testcase"))
        assert int(suite.get("failures")) == outcomes.count("fail") + outcomes.count("not run"), suite.get("name")
        assert int(suite.get("errors")) == outcomes.count("error") and suite.get("skipped") == "0"
    g2 = cases(suites["G2 single-node baseline (gates)"])
    assert set(g2.values()) == {"failure"}                   # G2 never ran: red, not a green "skipped"
    assert "G4 / link cut: longest stall (no completed I/O)" in cases(suites["G4 stability and sign-off (gates)"])
    steps = cases(suites["steps"])                            # the runs' own verdicts, apart from the gates
    assert "selftest / drives recognized" in steps and "fault run link-down / I/O errors" in steps
    assert all(s.get("time") is not None and s.get("timestamp") for s in root.findall("testsuite"))


def test_names_do_not_change_when_a_result_flips(tmp_path):
    root_pass, _ = report(tmp_path, "a", evidence(tmp_path / "a-ev"))
    root_fail, _ = report(tmp_path, "b", evidence(tmp_path / "b-ev", link_errors=3))
    names = [[(s.get("name"), c.get("classname"), c.get("name")) for s in r.findall("testsuite")
              for c in s.findall("testcase")] for r in (root_pass, root_fail)]
    assert names[0] == names[1]
    steps = cases(next(s for s in root_fail.findall("testsuite") if s.get("name") == "steps"))
    assert steps["fault run link-down / I/O errors"] == "failure"
    assert not any("visible" in s.get("name") for s in root_fail.findall("testsuite"))


def test_not_run_as_skipped_on_request(tmp_path):
    root, _ = report(tmp_path, "r", evidence(tmp_path / "ev"), "--junit-not-run", "skipped")
    g2 = next(s for s in root.findall("testsuite") if s.get("name").startswith("G2"))
    assert set(cases(g2).values()) == {"skipped"} and g2.get("failures") == "0"
    assert g2.get("skipped") == g2.get("tests") == str(len(cases(g2)))


@pytest.mark.skipif(shutil.which("xmllint") is None, reason="xmllint (libxml2-utils, scripts/setup) missing")
def test_junit_validates_against_the_xsd(tmp_path):
    paths = evidence(tmp_path / "ev", link_errors=1)
    paths.append(fake_run(tmp_path / "ev", "line-efficiency", {}, outcome="error"))   # an ERROR too
    report(tmp_path, "r", paths)
    done = subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(tmp_path / "r" / "junit.xml")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    root = ElementTree.parse(tmp_path / "r" / "junit.xml").getroot()
    assert any(c.find("error") is not None for c in root.iter("testcase"))
    broken = tmp_path / "broken.xml"                              # the schema does reject a wrong file
    broken.write_text((tmp_path / "r" / "junit.xml").read_text().replace(' timestamp="', ' stamp="'))
    assert subprocess.run(["xmllint", "--noout", "--schema", str(XSD), str(broken)], capture_output=True,
                          timeout=60).returncode != 0
