"""The runs folder's ledger (core/ledger.py): every run begun and finished there, hash-chained; a gate lists the
measuring runs beside its evidence that it was not given (gates/omitted.py), and the report prints them. The twin of
the one passing line-efficiency run given alone is the same folder with every run given: nothing listed."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path

from fxprobe.core import ledger
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import omitted
from gate_helpers import fake_run, fxprobe, runs_of

LINE = {"summary": {"line_efficiency": 0.91, "mean_bps": 91e9}, "port_speed_bps": 100e9, "interface": "ens1f0"}
SHORT = {"summary": {"line_efficiency": 0.71, "mean_bps": 71e9}, "port_speed_bps": 100e9, "interface": "ens1f0"}


def test_each_run_is_begun_and_finished_in_its_folder_s_ledger_chained_line_to_line(tmp_path):
    first = fake_run(tmp_path, "line-efficiency", SHORT, "fail")
    second = fake_run(tmp_path, "line-efficiency", LINE)
    records, problems = ledger.read(tmp_path / ledger.LEDGER)
    assert problems == []
    assert [(r["seq"], r["event"], r["run"], r["outcome"]) for r in records] == [
        (1, "begun", first.name, None), (2, "finished", first.name, "fail"),
        (3, "begun", second.name, None), (4, "finished", second.name, "pass")]
    assert records[3]["manifest_sha256"] == RunDir(second).manifest_sha256() and records[0]["prev"] == ""


def test_a_line_taken_out_or_edited_breaks_the_chain_at_the_next_one(tmp_path):
    for outcome in ("fail", "fail", "pass"):
        fake_run(tmp_path, "line-efficiency", LINE if outcome == "pass" else SHORT, outcome)
    path = tmp_path / ledger.LEDGER
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:1] + lines[3:]) + "\n")          # the first run's end and the second's start
    _, problems = ledger.read(path)
    assert problems == ["line 2 (seq 4) does not follow the line before it (its prev is not that line's SHA-256, or "
                        "its seq is not its place): a line was taken out or edited"] + problems[1:], problems
    path.write_text("\n".join(lines[:1] + [lines[1].replace('"fail"', '"pass"')] + lines[2:]) + "\n")
    assert [p.split(" (")[0] for p in ledger.read(path)[1]] == ["line 3"]     # the edited line 2 no longer chains


def _append_many(folder: str, start: int) -> None:
    for i in range(start, start + 40):
        ledger.append(Path(folder), {"event": "begun", "run": f"r{i}", "at": "2026-12-07T00:00:00Z"})


def test_two_processes_appending_at_once_keep_one_chain(tmp_path):
    workers = [multiprocessing.Process(target=_append_many, args=(str(tmp_path), s)) for s in (0, 100)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    records, problems = ledger.read(tmp_path / ledger.LEDGER)
    assert problems == [] and len(records) == 80 and [r["seq"] for r in records] == list(range(1, 81))


def test_a_gate_given_the_best_run_lists_the_others_and_its_twin_given_all_lists_none(tmp_path, capsys):
    runs = tmp_path / "evidence"
    failed = [fake_run(runs, "line-efficiency", SHORT, "fail") for _ in range(2)]
    best = fake_run(runs, "line-efficiency", LINE)
    fake_run(runs, "fault run", {"dry_run": True, "plan": {"kind": "drive-pull"}})     # measured nothing: not listed
    assert fxprobe(tmp_path, "gate", "g2", "--evidence", str(best)) in (1, 3)
    out = capsys.readouterr().out
    for run in failed:
        assert f"NOT GIVEN AS EVIDENCE: {run.name} (line-efficiency, FAIL, finished " in out, out
    assert "fault-run" not in out.split("NOT GIVEN AS EVIDENCE", 1)[1]
    recorded = json.loads((runs_of(tmp_path, "gate g2")[-1] / "results.json").read_text())["ledger"]
    assert [o["run"] for o in recorded["omitted"]] == [r.name for r in failed] and recorded["problems"] == []
    assert fxprobe(tmp_path, "gate", "g2", *[a for r in (*failed, best) for a in ("--evidence", str(r))]) == 1
    assert "NOT GIVEN AS EVIDENCE" not in capsys.readouterr().out


def test_the_report_prints_the_runs_its_gate_run_was_not_given(tmp_path):
    from fxprobe.report.build import build_report
    runs = tmp_path / "evidence"
    failed = fake_run(runs, "line-efficiency", SHORT, "fail")
    best = fake_run(runs, "line-efficiency", LINE)
    fxprobe(tmp_path, "gate", "all", "--evidence", str(best))
    report = build_report([best, runs_of(tmp_path, "gate all")[-1]], tmp_path / "report")
    (head,) = report.headlines
    assert any(line.startswith(f"NOT GIVEN AS EVIDENCE: {failed.name} (line-efficiency, FAIL") for line in
               head.not_given), head.lines()
    assert f"- NOT GIVEN AS EVIDENCE: {failed.name}" in (tmp_path / "report" / "report.md").read_text()


def test_evidence_with_no_ledger_beside_it_says_so(tmp_path):
    run = fake_run(tmp_path / "evidence", "line-efficiency", LINE)
    (run.parent / ledger.LEDGER).unlink()
    assert omitted.lines(omitted.review([run])) == [
        f"LEDGER: no {ledger.LEDGER} in {run.parent.resolve()}: runs made there and not given cannot be seen"]


def test_a_run_that_never_finished_is_listed_as_such(tmp_path):
    crashed = RunDir.start("soak", ["fxprobe", "soak"], base=tmp_path)
    given = fake_run(tmp_path, "soak", {"duration_s": 10.0})
    (line,) = omitted.lines(omitted.review([given]))
    assert line.startswith(f"NOT GIVEN AS EVIDENCE: {crashed.path.name} (soak, began ") and "never finished" in line
    crashed.finish(Outcome.PASS, {})
