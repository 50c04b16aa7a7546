"""The ledgers (core/ledger.py): every run begun and finished in its runs folder and on the machine, hash-chained; a
gate lists the measuring runs beside its evidence, or of the same commands in the machine's ledger, that it was not
given (gates/omitted.py), and the report prints them. The twin of the one passing line-efficiency run given alone is
every run given: nothing listed. Each test has a machine's ledger of its own (tests/conftest.py)."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
from pathlib import Path

from fxprobe.core import ledger
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import omitted
from gate_helpers import fake_run, fxprobe, rewritten, runs_of

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
    (missing, machine) = omitted.lines(omitted.review([run]))
    assert missing == (f"LEDGER: no {ledger.LEDGER} in {run.parent.resolve()}: runs made there and not given cannot "
                       f"be seen ({run.name} was its line 1: it was deleted)")
    assert machine.startswith(f"MACHINE LEDGER: {ledger.machine_ledger().resolve()} on ") and \
        machine.endswith(", 2 lines; the given runs are its lines 1"), machine


def test_a_run_that_never_finished_is_listed_as_such(tmp_path):
    crashed = RunDir.start("soak", ["fxprobe", "soak"], base=tmp_path)
    given = fake_run(tmp_path, "soak", {"duration_s": 10.0})
    (line,) = [line for line in omitted.lines(omitted.review([given])) if not line.startswith("MACHINE LEDGER")]
    assert line.startswith(f"NOT GIVEN AS EVIDENCE: {crashed.path.name} (soak, began ") and "never finished" in line
    crashed.finish(Outcome.PASS, {})


def _gate_lines(tmp_path, capsys, *runs: Path, gates_file: Path | None = None) -> list[str]:
    args = [a for r in runs for a in ("--evidence", str(r))] + (["--config", str(gates_file)] if gates_file else [])
    assert fxprobe(tmp_path, "gate", "g2", *args) in (1, 3)
    return [line.strip() for line in capsys.readouterr().out.splitlines()
            if line.strip().startswith(("NOT GIVEN", "LEDGER", "MACHINE LEDGER"))]


def test_a_fresh_runs_folder_per_attempt_is_listed_from_the_machine_s_ledger_and_its_twin_given_all_is_not(
        tmp_path, capsys):
    failed = [fake_run(tmp_path / f"attempt{i}", "line-efficiency", SHORT, "fail") for i in (1, 2)]
    fake_run(tmp_path / "other", "selftest", {"drives": []})          # another command: not the given one's
    fake_run(tmp_path / "other", "line-efficiency", {"dry_run": True})  # a dry run measured nothing
    best = fake_run(tmp_path / "attempt3", "line-efficiency", LINE)
    machine = ledger.machine_ledger().resolve()
    out = _gate_lines(tmp_path, capsys, best)
    assert out == [f"NOT GIVEN AS EVIDENCE: {run.resolve()} (line-efficiency, FAIL, finished {_finished(run)}) - "
                   f"listed in {machine}" for run in failed] + [
        f"MACHINE LEDGER: {machine} on {socket.gethostname()}, begun {_began(machine)}, 11 lines; the given runs "
        "are its lines 9"], out
    recorded = json.loads((best / "results.json").read_text())["ledger_place"]
    assert recorded == {"folder_seq": 1, "machine": {"path": str(machine), "host": socket.gethostname(), "seq": 9,
                                                     "first_sha256": ledger.first_line(machine).first_sha256,
                                                     "began": _began(machine)}}
    out = _gate_lines(tmp_path, capsys, *failed, best)
    assert not [line for line in out if not line.startswith("MACHINE LEDGER")], out
    gates = tmp_path / "gates.toml"       # an acceptance period that begins after the runs: listed no more, counted
    gates.write_text("[array]\nperiod_from = 2099-01-01\n")
    assert _gate_lines(tmp_path, capsys, best, gates_file=gates)[-1].endswith(
        "; 2 run(s) of the same commands outside the acceptance period not listed")


def test_a_machine_s_ledger_deleted_or_begun_again_after_the_runs_is_named_from_the_evidence(tmp_path, capsys):
    fake_run(tmp_path / "attempt1", "line-efficiency", SHORT, "fail")
    best = fake_run(tmp_path / "attempt2", "line-efficiency", LINE)
    machine = ledger.machine_ledger().resolve()
    began = _began(machine)
    machine.unlink()
    (gone,) = [line for line in omitted.lines(omitted.review([best])) if "machine's ledger" in line]
    assert gone == (f"LEDGER: the machine's ledger of {socket.gethostname()} that 1 given run(s) were written to "
                    f"({machine}, begun {began}) is not here; the evidence holds its lines 3, and the 2 lines before "
                    "and between them (other runs' begun and finished lines) cannot be seen: ask for that file")
    fake_run(tmp_path / "later", "selftest", {"drives": []})           # the next run begins a new ledger there
    (again,) = [line for line in omitted.lines(omitted.review([best])) if "machine's ledger" in line]
    assert f"is not here: {machine} is another ledger, begun {_began(machine)};" in again


def test_a_ledger_cut_short_before_a_given_run_s_own_line_is_named(tmp_path):
    for outcome in ("fail", "fail"):
        fake_run(tmp_path, "line-efficiency", SHORT, outcome)
    best = fake_run(tmp_path, "line-efficiency", LINE)
    folder = tmp_path / ledger.LEDGER
    folder.write_text("".join(folder.read_text().splitlines(keepends=True)[:4]))     # the two failed runs' lines
    problems = omitted.review([best])["problems"]
    assert problems == [f"{folder.resolve()}: {best.name} was its line 5, but it holds 4 lines: it was cut short"]
    folder.write_text("")                                                             # ... and emptied
    assert omitted.review([best])["problems"] == [
        f"{folder.resolve()}: {best.name} was its line 5, but it holds 0 lines: it was cut short"]


def test_evidence_stripped_of_its_place_is_found_in_this_machine_s_ledger(tmp_path):
    failed = fake_run(tmp_path / "attempt1", "line-efficiency", SHORT, "fail")
    best = fake_run(tmp_path / "attempt2", "line-efficiency", LINE)
    data = json.loads((best / "results.json").read_text())
    del data["ledger_place"]
    rewritten(best, data)                                   # the manifest made again: the folder checks out
    review = omitted.review([best])
    assert [o["run"] for o in review["omitted"]] == [failed.name]
    assert review["problems"] == [f"1 given run(s) record no place in a machine's ledger (made before fxprobe kept "
                                  f"one, or it could not be written): runs of the same commands in other folders "
                                  f"cannot be seen for them: {best.name}"]
    assert review["machines"][0]["host"] == socket.gethostname() and review["machines"][0]["given"] == [3]


def _began(machine: Path) -> str:
    return ledger.first_line(machine).began


def _finished(run: Path) -> str:
    records, _ = ledger.read(ledger.machine_ledger())
    (end,) = [r for r in records if r["event"] == "finished" and r["run"] == run.name]
    return end["at"]


def test_a_line_stamped_before_the_one_before_it_says_the_clock_went_back_and_an_ntp_step_does_not(tmp_path):
    for number, at in enumerate(("2026-12-05T10:00:00.000Z", "2026-12-05T10:00:30.000Z", "2026-12-05T10:00:29.500Z",
                                 "2026-12-04T09:00:00.000Z", "2026-12-05T10:01:00.000Z"), 1):
        ledger.append(tmp_path, {"event": "begun", "run": f"r{number}", "at": at})
    _, problems = ledger.read(tmp_path / ledger.LEDGER)       # line 3: 0.5 s back (NTP); line 4: a day and an hour
    assert problems == ["line 4 (seq 4) is stamped 2026-12-04T09:00:00.000Z, 90030.000 s before line 2 "
                        "(2026-12-05T10:00:30.000Z): the machine's clock went back (more than the 1 s allowed for an "
                        "NTP step)"]


def _noted(tmp_path: Path, capsys, who: str = "A. Witness (buyer)") -> tuple[dict, Path]:
    """`fxprobe ledger -o json`'s last line, noted in a gates.toml as the witness would."""
    assert fxprobe(tmp_path, "-o", "json", "ledger") == 0
    summary = json.loads(capsys.readouterr().out)["machine_ledger"]
    gates = tmp_path / "gates.toml"
    gates.write_text(f'[[ledger.checkpoints]]\nhost = "{summary["host"]}"\nseq = {summary["last"]["seq"]}\n'
                     f'sha256 = "{summary["last"]["sha256"]}"\nnoted = "{who}, {summary["last"]["at"]}"\n')
    return summary, gates


def test_the_line_a_witness_noted_is_found_again_and_its_twin_a_ledger_begun_again_since_is_named(tmp_path, capsys):
    fake_run(tmp_path / "attempt1", "line-efficiency", SHORT, "fail")
    summary, gates = _noted(tmp_path, capsys)
    assert summary["last"]["seq"] == 3 and summary["lines"] == 3 and summary["problems"] == []
    assert summary["runs"] == {"line-efficiency": 1, "ledger": 1} and summary["host"] == socket.gethostname()
    best = fake_run(tmp_path / "attempt2", "line-efficiency", LINE)
    out = _gate_lines(tmp_path, capsys, best, gates_file=gates)
    assert out[-1].endswith(f"; the witness's line 3 (A. Witness (buyer), {summary['last']['at']}) found as noted")
    assert not [line for line in out if line.startswith("LEDGER")], out
    ledger.machine_ledger().unlink()               # the twin: the ledger deleted, the passing run made again
    again = fake_run(tmp_path / "attempt3", "line-efficiency", LINE)
    out = _gate_lines(tmp_path, capsys, again, gates_file=gates)
    assert (f"LEDGER: {ledger.machine_ledger().resolve()} on {socket.gethostname()} does not hold the line the "
            f"witness noted (line 3, sha256 {summary['last']['sha256']}, noted: A. Witness (buyer), "
            f"{summary['last']['at']}): that machine's ledger was begun again, cut short or rewritten since it was "
            "noted") in out, out
    assert not any("NOT GIVEN" in line for line in out)    # the failed attempt went with the old ledger: only the
    gates.write_text(gates.read_text().replace(socket.gethostname(), "bench-02"))        # checkpoint tells
    assert any(line.startswith("LEDGER: the line the witness noted in bench-02's ledger (line 3, ") and
               line.endswith("was not looked for: no given run was written to that machine's ledger, and it is not "
                             "this machine's") for line in _gate_lines(tmp_path, capsys, again, gates_file=gates))


def test_fxprobe_ledger_says_the_chain_holds_and_fails_where_a_line_was_edited(tmp_path, capsys):
    fake_run(tmp_path / "attempt1", "line-efficiency", SHORT, "fail")
    assert fxprobe(tmp_path, "ledger") == 0
    out = capsys.readouterr().out
    assert "chain: holds" in out and "[[ledger.checkpoints]]" in out and 'seq = 3' in out, out
    path = ledger.machine_ledger()
    lines = path.read_text().splitlines()
    path.write_text("\n".join([lines[0], lines[1].replace('"fail"', '"pass"'), *lines[2:]]) + "\n")
    assert fxprobe(tmp_path, "ledger") == 1
    out = capsys.readouterr().out
    assert "chain: BROKEN: line 3 (seq 3) does not follow the line before it" in out, out
    path.chmod(0o000)
    try:
        if not os.access(path, os.R_OK):     # root reads a file whatever its mode
            assert fxprobe(tmp_path, "ledger") == 4
    finally:
        path.chmod(0o600)


def test_a_checkpoint_that_is_not_a_sha256_is_refused_naming_the_field(tmp_path, capsys):
    best = fake_run(tmp_path / "attempt1", "line-efficiency", LINE)
    gates = tmp_path / "gates.toml"
    gates.write_text('[[ledger.checkpoints]]\nhost = "bench-01"\nseq = 3\nsha256 = "abc"\nnoted = "me"\n')
    assert fxprobe(tmp_path, "gate", "g2", "--config", str(gates), "--evidence", str(best)) == 2
    assert "gates.toml: field 'ledger.checkpoints[0].sha256': string should match pattern" in capsys.readouterr().err


def test_a_noted_line_of_this_machine_s_ledger_that_no_given_run_was_written_to_is_still_looked_for(tmp_path, capsys):
    summary, gates = _noted(tmp_path, capsys)
    old = fake_run(tmp_path / "attempt1", "line-efficiency", LINE)
    data = json.loads((old / "results.json").read_text())
    del data["ledger_place"]                    # a run from before the machine's ledger, say
    rewritten(old, data)
    ledger.machine_ledger().write_text("".join(ledger.machine_ledger().read_text().splitlines(keepends=True)[:2]))
    out = _gate_lines(tmp_path, capsys, old, gates_file=gates)
    assert out[-1].endswith(f", 3 lines; no given run was written to it; the witness's line 1 (A. Witness (buyer), "
                            f"{summary['last']['at']}) found as noted"), out
