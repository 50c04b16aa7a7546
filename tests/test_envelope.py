"""Errors are evidence: the library writes every results.json envelope, a failed command's too,
and gates show ERROR for the criteria a failed run fed while the gate run itself completes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fxprobe.core.errors import ToolError
from fxprobe.core.rundir import DID_NOT_FINISH, ENVELOPE_KEYS, RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.gates import GATES, Evidence, load_config
from gate_helpers import fake_run, fxprobe, results_of, runs_of


def only_run(tmp_path: Path, command: str) -> Path:
    runs = runs_of(tmp_path, command)
    assert len(runs) == 1, runs
    return runs[0]


def test_a_failing_command_records_outcome_error_with_reason_and_exit_code(tmp_path, capsys):
    # iperf3 finds no server: a tool error after the run folder was made (today: no results.json at all)
    code = fxprobe(tmp_path, "line-efficiency", "--peer", "127.0.0.1", "--server-running", "--transport", "tcp",
                   "--line-rate", "1", "--duration", "1")
    err = capsys.readouterr().err
    run = only_run(tmp_path, "line-efficiency")
    results = results_of(run)
    assert code == 4 and results["outcome"] == "error" and results["exit_code"] == 4
    assert "iperf3" in results["reason"] and results["command"] == "line-efficiency"
    assert results["argv"][:2] == ["fxprobe", "--runs"] and results["finished"]
    assert (run / "manifest.json").exists()
    last = err.strip().splitlines()[-1]
    assert last.startswith("fxprobe: iperf3") and str(run) in last   # one line, naming where the evidence went

    code = fxprobe(tmp_path, "gate", "all", "--evidence", str(run))
    gates = results_of(only_run(tmp_path, "gate all"))
    g2 = next(g for g in gates["gates"] if g["name"].startswith("G2"))
    line = next(c for c in g2["criteria"] if c["name"] == "line efficiency vs the gate's line rate")
    assert code == 4 and gates["outcome"] == "error" and g2["outcome"] == "error"
    assert line["outcome"] == "error" and "iperf3" in line["detail"] and "(exit 4)" in line["detail"]


def test_a_killed_run_is_an_error_not_a_missing_run(tmp_path):
    """begin() writes 'error / did not finish' first, so kill -9 half way leaves evidence that says so."""
    run = RunDir.start("soak", ["fxprobe", "soak"], base=tmp_path)
    run.note(profile="small-file-dataset")
    recorded = results_of(run.path)
    assert recorded["outcome"] == "error" and recorded["reason"] == DID_NOT_FINISH and recorded["exit_code"] is None
    verdict = GATES["g4"].evaluate(Evidence.from_paths([run.path]), load_config(None))
    soak = [c for c in verdict.criteria if c.name.startswith("soak")]
    assert [c.outcome for c in soak] == [Outcome.ERROR] * 4 and "did not finish" in soak[0].detail


def test_an_errored_run_counts_for_every_requirement_it_could_have_fed(tmp_path):
    """A fault run that failed before its plan was known may have been the drive pull or the link cut."""
    run = RunDir.start("fault run", ["fxprobe", "fault", "run", "x"], base=tmp_path)
    run.fail("lab guest unreachable", 4)
    verdict = GATES["g4"].evaluate(Evidence.from_paths([run.path]), load_config(None))
    faults = {c.name: c.outcome for c in verdict.criteria if "drive pull" in c.name or "link cut" in c.name}
    assert set(faults.values()) == {Outcome.ERROR} and len(faults) == 2 * 9     # nine criteria per fault kind
    # its figures, had it left any, are not judged: an errored run's criteria are ERROR, never PASS
    partial = fake_run(tmp_path, "soak", {"duration_s": 72 * 3600 + 1, "interruptions": []}, outcome="error")
    soak = GATES["g4"].evaluate(Evidence.from_paths([partial]), load_config(None))
    assert {c.outcome for c in soak.criteria if c.name.startswith("soak")} == {Outcome.ERROR}


def test_a_folder_without_results_is_an_error_in_every_gate_and_the_gate_run_completes(tmp_path):
    half = tmp_path / "half"
    (half / "raw").mkdir(parents=True)
    (half / "commands.jsonl").write_text("")
    assert fxprobe(tmp_path, "gate", "all", "--evidence", str(half)) == 4     # today: exit 2, no gate run
    gates = results_of(only_run(tmp_path, "gate all"))["gates"]
    assert all(any(c["outcome"] == "error" and "half" in c["name"] for c in g["criteria"]) for g in gates)


def test_recording_turns_any_exception_into_the_error_envelope(tmp_path):
    run = RunDir.start("selftest", ["fxprobe", "selftest"], base=tmp_path)
    with pytest.raises(ToolError), run.recording():
        raise ToolError("nvme list failed")
    assert results_of(run.path)["reason"] == "nvme list failed"
    other = RunDir.start("selftest", ["fxprobe", "selftest"], base=tmp_path)
    with pytest.raises(KeyboardInterrupt), other.recording():
        raise KeyboardInterrupt
    assert results_of(other.path)["exit_code"] == 130 and results_of(other.path)["outcome"] == "error"


def test_the_envelope_is_the_library_s_and_results_cannot_overwrite_it(tmp_path):
    run = RunDir.start("doctor", ["fxprobe", "doctor"], base=tmp_path)
    with pytest.raises(ValueError, match="envelope keys"):
        run.finish(Outcome.PASS, {"outcome": "pass"})
    written = run.finish(Outcome.NOT_RUN, {"doctor": {}}, reason="no lab here")
    assert list(written)[:len(ENVELOPE_KEYS)] == list(json.loads((run.path / "results.json").read_text()))[:len(ENVELOPE_KEYS)]
    assert written["outcome"] == "not run" and written["exit_code"] == 3 and written["reason"] == "no lab here"
    assert set(ENVELOPE_KEYS) <= set(written)
    assert run.fail("late") is None and results_of(run.path)["outcome"] == "not run"   # finished stays finished
