"""The evidence chain: every run folder the gates or a report read is checked against its own manifest.json, and a
count a gate reads is a whole number >= 0. Each test plants a "fail" twin (a folder edited after its command wrote
it, an impossible count) beside the honest folder, which still passes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, load_config
from fxprobe.report.build import build_report
from fxprobe.report.bundle import verify_bundle, write_manifest
from fxprobe.report.signing import generate_keypair
from gate_helpers import fake_run, fxprobe, produced_fault, results_of, rewritten, runs_of

LINE = "line efficiency vs the gate's line rate"
DAY = 72 * 3600


def line_efficiency(base: Path, mean_bps: float) -> Path:
    return fake_run(base, "line-efficiency", {"summary": {"mean_bps": mean_bps, "line_efficiency": 0.7},
                                              "port_speed_bps": 100e9, "interface": "eth0", "label": "planted"})


def soak(base: Path, duration_s: float, interruptions=()) -> Path:
    return fake_run(base, "soak", {"duration_s": duration_s, "planned_s": DAY, "interruptions": list(interruptions)})


def edit(run: Path, change) -> Path:
    """Edit results.json after the command wrote it (the manifest is left as written)."""
    data = json.loads((run / "results.json").read_text())
    change(data)
    (run / "results.json").write_text(json.dumps(data))
    return run


def criteria(gate: str, paths: list[Path]) -> dict:
    verdict = GATES[gate].evaluate(Evidence.from_paths(paths), load_config(None))
    return {c.name: c for c in verdict.criteria} | {"": verdict}


def test_an_edited_line_efficiency_run_feeds_no_criterion_and_is_an_error_naming_it(tmp_path):
    honest = criteria("g2", [line_efficiency(tmp_path / "a", 84e9)])
    assert honest[LINE].outcome is Outcome.PASS and honest[LINE].measured == 84.0
    run = line_efficiency(tmp_path / "b", 70e9)
    assert criteria("g2", [run])[LINE].outcome is Outcome.FAIL
    edit(run, lambda d: d["summary"].update(mean_bps=84e9))                  # before: PASS 84.0 %
    tampered = criteria("g2", [run])
    assert tampered[LINE].outcome is Outcome.NOT_RUN and tampered[LINE].measured is None
    altered = tampered[f"evidence {run.name} intact"]
    assert altered.outcome is Outcome.ERROR and str(run) in altered.detail
    assert "results.json: changed (SHA-256 differs from the manifest)" in altered.detail
    assert tampered[""].outcome is Outcome.ERROR


def test_an_edited_soak_does_not_pass_g4(tmp_path):
    honest = criteria("g4", [soak(tmp_path / "a", DAY)])
    assert honest["soak duration"].outcome is Outcome.PASS and honest["soak interruptions"].outcome is Outcome.PASS
    run = edit(soak(tmp_path / "b", 30.0, [{"kind": "stall"}]), lambda d: d.update(duration_s=DAY, interruptions=[]))
    tampered = criteria("g4", [run])
    assert tampered["soak duration"].outcome is Outcome.NOT_RUN
    assert tampered["soak interruptions"].outcome is Outcome.NOT_RUN
    assert tampered[f"evidence {run.name} intact"].outcome is Outcome.ERROR


@pytest.mark.parametrize("damage, words", [
    (lambda run: (run / "manifest.json").unlink(), "manifest.json: missing"),
    (lambda run: (run / "manifest.json").write_text("[1]"), "manifest.json: not a valid manifest"),
    (lambda run: (run / "raw" / "planted.log").write_text("x"), "raw/planted.log: not in the manifest"),
    (lambda run: (run / "commands.jsonl").unlink(), "commands.jsonl: missing"),
])
def test_a_missing_manifest_or_a_missing_or_added_file_is_an_error(tmp_path, damage, words):
    run = soak(tmp_path, DAY)
    (run / "commands.jsonl").write_text('{"argv": ["true"]}\n')
    rewritten(run)
    assert criteria("g4", [run])["soak duration"].outcome is Outcome.PASS
    damage(run)
    found = criteria("g4", [run])
    assert found["soak duration"].outcome is Outcome.NOT_RUN
    assert words in found[f"evidence {run.name} intact"].detail, found[f"evidence {run.name} intact"].detail


def test_a_run_killed_before_its_end_has_no_manifest_and_stays_an_error_with_its_reason(tmp_path):
    run = RunDir.start("soak", ["fxprobe", "soak"], base=tmp_path)      # begun, never finished: no manifest
    found = criteria("g4", [run.path])
    assert found["soak duration"].outcome is Outcome.ERROR and "did not finish" in found["soak duration"].detail
    assert f"evidence {run.path.name} intact" not in found


def test_an_edited_fleet_sub_run_feeds_nothing_even_with_the_fleet_re_hashed(tmp_path):
    from test_fleet import fleet_selftest
    path = fleet_selftest(tmp_path, {"array": ("pass", 24), "array2": ("fail", 23)})
    sub = path / "nodes" / "array2"
    edit(sub, lambda d: d.update(drives_recognized=24, outcome="pass"))
    rewritten(path)                                  # the fleet's own manifest made again over the edit
    found = criteria("g1", [path])
    assert "drives recognized [array2]" not in found and found["drives recognized [array]"].outcome is Outcome.PASS
    altered = found["evidence array2 intact"]
    assert altered.outcome is Outcome.ERROR and str(sub) in altered.detail
    from fxprobe.report.collect import read_run                  # and the report reads it as the gates do
    assert read_run(path).problems == ("nodes/array2: results.json: changed (SHA-256 differs from the manifest)",)


@pytest.mark.parametrize("field, value", [("interruptions", -1), ("interruptions", 0.5)])
def test_an_impossible_interruption_count_is_an_error(tmp_path, field, value):
    run = rewritten(soak(tmp_path, DAY), None)
    assert criteria("g4", [run])["soak interruptions"].outcome is Outcome.PASS
    rewritten(run, {**results_of(run), field: value})          # even as a producer would have written it
    found = criteria("g4", [run])["soak interruptions"]
    assert found.outcome is Outcome.ERROR and "a count is a whole number >= 0" in found.detail


def test_negative_fault_errors_and_mismatches_are_errors_not_credits(tmp_path):
    fault = produced_fault("drive-pull")
    honest = criteria("g4", [fake_run(tmp_path / "a", "fault run", fault)])
    assert honest["drive pull: I/O errors seen by the workload"].outcome is Outcome.PASS
    fault["impact"]["errors"] = -3
    for c in fault["criteria"]:
        if c["name"] == "data verified (mismatches)":
            c["measured"] = -5                        # would cancel 5 bad reads of another run
    found = criteria("g4", [fake_run(tmp_path / "b", "fault run", fault),
                            fake_run(tmp_path / "c", "fault run", produced_fault("link-down", mismatches=5))])
    assert found["drive pull: I/O errors seen by the workload"].outcome is Outcome.ERROR
    data = found["data verified (mismatches)"]
    assert data.outcome is Outcome.ERROR and "is not a count" in data.detail


# -- the report: build reads, verify checks, each bundled run's own manifest ------------------------------------
@pytest.fixture()
def keys(tmp_path):
    generate_keypair(tmp_path / "k.pem", tmp_path / "k.pub")
    return tmp_path / "k.pem", tmp_path / "k.pub"


def test_report_build_shows_an_edited_run_as_an_error_and_verify_refuses_the_bundle(tmp_path, keys):
    honest = soak(tmp_path / "runs", DAY)
    built = build_report([honest], tmp_path / "honest", keys[0])
    assert built.altered == () and verify_bundle(tmp_path / "honest", keys[1]).outcome is Outcome.PASS
    run = edit(soak(tmp_path / "runs2", 30.0), lambda d: d.update(duration_s=DAY))
    built = build_report([run], tmp_path / "rep", keys[0])
    assert built.altered == (f"{run.name}: results.json: changed (SHA-256 differs from the manifest)",)
    assert any(line.startswith("EVIDENCE NOT INTACT") and run.name in line for line in built.lines())
    assert f"ERROR | evidence {run.name} intact" in (tmp_path / "rep" / "report.md").read_text()
    result = verify_bundle(tmp_path / "rep", keys[1])
    assert result.outcome is Outcome.FAIL and result.signature == "valid"
    assert result.problems == (f"evidence/{run.name}: results.json: changed (SHA-256 differs from the manifest) "
                               "(the run's own manifest.json)",)


def test_verify_names_a_bundled_run_edited_after_signing_and_re_signed(tmp_path, keys, capsys):
    build_report([soak(tmp_path / "runs", 30.0)], tmp_path / "rep", keys[0])
    assert fxprobe(tmp_path, "report", "verify", str(tmp_path / "rep"), "--public-key", str(keys[1])) == 0
    (bundled,) = (tmp_path / "rep" / "evidence").iterdir()
    edit(bundled, lambda d: d.update(duration_s=DAY))
    write_manifest(tmp_path / "rep", keys[0])           # the bundle re-hashed and re-signed with the same key
    assert fxprobe(tmp_path, "report", "verify", str(tmp_path / "rep"), "--public-key", str(keys[1])) == 1
    out = capsys.readouterr().out
    assert "NOT VERIFIED" in out and f"evidence/{bundled.name}: results.json: changed" in out
    assert results_of(runs_of(tmp_path, "report verify")[-1])["verification"]["ok"] is False


def test_the_captured_rehearsal_steps_are_intact_and_a_copy_edited_is_not(tmp_path):
    captured = Path(__file__).parent / "fixtures" / "report" / "rehearsal"
    assert {p.name: RunDir(p).integrity() for p in captured.iterdir()} == {p.name: [] for p in captured.iterdir()}
    line = tmp_path / "02-line-efficiency"
    shutil.copytree(captured / "02-line-efficiency-emulated-20-Mb-s-link", line)
    config = tmp_path / "g.toml"
    config.write_text("[g2]\nline_rate_gbps = 0.02\nline_efficiency_min_pct = 99.5\n")
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(line), "--config", str(config)) == 1   # 99.0 % FAIL
    edit(line, lambda d: d["summary"].update(mean_bps=19.95e6))                                    # 99.75 %
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(line), "--config", str(config)) == 4
    verdict = results_of(runs_of(tmp_path, "gate g2")[-1])["verdict"]
    assert [c["name"] for c in verdict["criteria"] if c["outcome"] == "error"] == ["evidence 02-line-efficiency intact"]
