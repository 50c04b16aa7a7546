"""Soak: durations, fio's status stream, the interruption monitor, records, summary, bad input."""

import json
from pathlib import Path
import subprocess
import sys

import pytest
from hypothesis import given, settings, strategies as st

from fxprobe import soak
from fxprobe.core.errors import BadInput, ParseError
from fxprobe.core.rundir import RunDir
from fxprobe.soak.state import SoakState


# -- durations ---------------------------------------------------------------------
@pytest.mark.parametrize("text, seconds", [("90", 90), ("90s", 90), ("10m", 600), ("72h", 259200),
                                           ("1h30m", 5400), ("2d", 172800), ("1.5m", 90), (" 5S ", 5)])
def test_durations(text, seconds):
    assert soak.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10x", "h", "-5s", "0", "0s", "1h-2m", "m10", "10 m", "nan"])
def test_malformed_durations_are_bad_input(text):
    with pytest.raises(BadInput, match="--duration"):
        soak.parse_duration(text)


# -- fio status stream -----------------------------------------------------------------
def status_doc(ts_ms, read_bytes, ios, total_err=None, error=0, write_bytes=0):
    job = {"jobname": "j", "error": error, "read": {"io_bytes": read_bytes, "total_ios": ios},
           "write": {"io_bytes": write_bytes, "total_ios": 0}}
    if total_err is not None:
        job["total_err"] = total_err
    return {"fio version": "fio-3.33", "timestamp": ts_ms // 1000, "timestamp_ms": ts_ms, "jobs": [job]}


def fio_text(docs):
    # fio prints each document indented, closing with "}" at a line start
    return "".join(json.dumps(d, indent=2) + "\n" for d in docs)


def test_parse_status_doc_sums_jobs_and_directions():
    doc = status_doc(1_000_500, 4096, 1, total_err=2, error=5, write_bytes=8192)
    doc["jobs"].append({"jobname": "k", "error": 0, "read": {"io_bytes": 100, "total_ios": 3}})
    point = soak.parse_status_doc(doc)
    assert point == soak.StatusPoint(1000.5, 4096 + 8192 + 100, 4, 2, 5, read_bytes=4096 + 100)


def test_a_job_stopped_on_an_error_it_did_not_count_is_one_error_as_in_the_fault_verdict():
    """fio 3.33 stopped on ENOSPC (captured): no total_err, error 28. The soak counts it as the fault verdict
    and the live line do (tools.fio_status.errored_ios): one errored I/O, not zero beside a job error."""
    from fxprobe.faults.analysis import fio_errors
    from fxprobe.tools.fio_status import last_json
    text = (Path(__file__).parent / "fixtures" / "fio" / "job-error-devfull-json-3.33.json").read_text()
    point = soak.parse_status_doc(last_json(text))
    assert (point.errors, point.job_error) == (1, 28) and fio_errors(text) == (1, "errno 28")


def test_parse_status_doc_keeps_the_longest_io():
    doc = status_doc(1_000_000, 4096, 1)
    doc["jobs"][0]["read"]["lat_ns"] = {"max": 7_500_000_000}
    doc["jobs"][0]["write"]["clat_ns"] = {"max": 2_000}
    assert soak.parse_status_doc(doc).max_lat_ns == 7_500_000_000


def test_parse_status_doc_names_the_bad_field():
    with pytest.raises(ParseError, match="timestamp_ms"):
        soak.parse_status_doc({"jobs": []})
    bad = status_doc(1000, "many", 1)
    with pytest.raises(ParseError, match=r"jobs\[0\]\.read\.io_bytes"):
        soak.parse_status_doc(bad)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 400), min_size=1, max_size=30), st.integers(1, 5))
def test_json_stream_gives_the_same_documents_whatever_the_chunking(cuts, count):
    docs = [status_doc(1000 * (i + 1), 4096 * i, i) for i in range(count)]
    data = ("fio: a warning line\n" + fio_text(docs)).encode()
    stream, got, pos = soak.JsonStream(), [], 0
    for cut in cuts:
        got += stream.feed(data[pos:pos + cut])
        pos += cut
    got += stream.feed(data[pos:])
    assert got == docs
    assert stream.skipped == ["fio: a warning line"]


# -- the monitor ---------------------------------------------------------------------------
def P(ts, ios, errors=0):
    return soak.StatusPoint(ts, ios * 4096, ios, errors, 0)


def test_monitor_stall_is_judged_from_fio_reports_and_closes_when_io_resumes():
    m = soak.Monitor(stall_s=5)
    m.new_segment(1, 100.0)
    out = m.observe(P(101, 10))
    assert out[0]["type"] == "sample" and out[0]["bw"] == 40960 and out[0]["iops"] == 10
    assert m.observe(P(102, 20))[0]["iops"] == 10
    for t in range(103, 108):
        assert len(m.observe(P(t, 20), received=t)) == 1   # no completed I/O since 102: 5 s is not > 5 s
        assert m.tick(t + 0.5) == []
    [sample, opened] = m.observe(P(108, 20), received=108)
    assert opened["kind"] == "stall" and opened["start_ts"] == 102
    assert len(m.observe(P(109, 20))) == 1                  # opened once
    out = m.observe(P(111, 25))
    assert out[-1]["type"] == "interruption-end" and out[-1]["seconds"] == 9


def test_late_reports_with_progress_are_not_a_stall_but_silence_is():
    m = soak.Monitor(stall_s=5)
    m.new_segment(1, 100.0)
    m.observe(P(101, 10), received=101)
    [sample, note] = m.observe(P(108, 90), received=108)    # 7 s late, but I/O completed: no stall
    assert note["type"] == "note" and "not counted as a stall" in note["detail"]
    assert m.tick(108 + m.silence_limit) == []
    [sample, stall] = m.observe(soak.StatusPoint(130, 0, 95, 0, 0, max_lat_ns=20_000_000_000), received=130)
    assert stall["kind"] == "stall" and stall["seconds"] == 20 and stall["start_ts"] == 110   # a stuck I/O
    assert "an I/O took 20.0 s" in stall["detail"] and "reported nothing for 22.0 s" in stall["detail"]
    [opened] = m.tick(130.5 + m.silence_limit)               # fio silent: its status thread is stuck too
    assert opened["kind"] == "stall" and opened["start_ts"] == 130 and "reported nothing" in opened["detail"]


def test_monitor_startup_grace_then_stall():
    m = soak.Monitor(stall_s=5)
    m.new_segment(1, 0.0)
    assert m.tick(30) == []
    [opened] = m.tick(soak.STARTUP_GRACE_S + 1)
    assert opened["kind"] == "stall" and "first" in opened["detail"]


def test_monitor_io_errors_and_lost_paths():
    m = soak.Monitor(stall_s=5)
    m.new_segment(1, 0.0)
    m.observe(P(1, 10))
    out = m.observe(P(2, 20, errors=3))
    assert out[-1]["kind"] == "io-error" and out[-1]["detail"].startswith("3 new")
    baseline = {"nvme1": {"state": "live", "transport": "tcp", "address": "traddr=10.0.1.1"}}
    assert m.paths(baseline, {"nvme1": {"state": "live"}}, 3) == []
    [lost] = m.paths(baseline, {"nvme1": {"state": "connecting"}}, 4)
    assert lost["kind"] == "path-lost" and "connecting" in lost["detail"]
    assert m.paths(baseline, {}, 5) == []         # still lost (now gone): not opened twice
    [back] = m.paths(baseline, {"nvme1": {"state": "live"}}, 9)
    assert back["type"] == "interruption-end" and back["seconds"] == 5


# -- records and summary ---------------------------------------------------------------------
def test_records_survive_a_torn_last_line(tmp_path):
    path = tmp_path / "soak.jsonl"
    log = soak.RecordLog(path)
    log.append({"type": "note", "detail": "n1"})
    log.close()
    with open(path, "a") as handle:
        handle.write('{"type": "sam')            # the crash came in the middle of a write
    assert soak.read_records(path) == [{"type": "note", "detail": "n1"}]
    log = soak.RecordLog(path)                     # reopening cuts the torn line
    log.append({"type": "end"})
    log.close()
    assert soak.read_records(path) == [{"type": "note", "detail": "n1"}, {"type": "end"}]


def test_summary_from_records_counts_covered_time_and_interruptions():
    m = soak.Monitor(stall_s=5)
    records = [{"type": "start", "profile": "p", "target": "/t", "planned_s": 10.0, "stall_s": 5, "sample_s": 10}]
    records += m.new_segment(1, 100.0)
    records.append({"type": "segment", "seg": 1, "ts": 100.0})
    for t, ios in ((101, 10), (102, 20), (103, 20), (104, 20), (105, 20), (106, 20), (107, 20), (108, 20)):
        records += m.observe(P(t, ios), received=t)
        records += m.tick(t + 0.5)
    records += m.observe(P(109, 30))
    records += m.fio_ended(109.5, "fio exited with code 1")
    records += m.new_segment(2, 111.0)
    records.append({"type": "segment", "seg": 2, "ts": 111.0})
    records += m.observe(P(112, 10))
    summary = soak.summarize(records)
    assert summary.duration_s == 10.0 and summary.samples == 10 and summary.segments == 2
    kinds = [(i.kind, i.seconds) for i in summary.interruptions]
    assert kinds == [("stall", 7.0), ("fio-exit", 1.5)]
    assert not summary.completed and "NOT finished" in summary.lines()[-1]
    verdict = summary.verdict()
    assert verdict.outcome.value == "fail"
    assert [c.line() for c in verdict.criteria][0].startswith("FAIL    interruptions: 2 (need <= 0")


# -- bad input: one line, exit 2 --------------------------------------------------------------
def fxprobe(tmp_path, capsys, *args):
    """The real entry point, in this process (a new interpreter per case costs seconds here)."""
    from fxprobe.cli.main import main
    code = main(["--runs", str(tmp_path / "runs"), *args])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return subprocess.CompletedProcess(args, code, out, err)


@pytest.mark.parametrize("args, words", [
    (["soak", "no-such-profile", "--duration", "10s", "--target", "{tmp}"], "unknown profile 'no-such-profile'"),
    (["soak", "small-file-dataset", "--duration", "10x", "--target", "{tmp}"], "'--duration': '10x'"),
    (["soak", "small-file-dataset", "--duration", "10s"], "--target are required"),
    (["soak", "--resume", "{tmp}/nowhere"], "not a run directory"),
    (["soak", "--resume", "{tmp}/other-run"], "not a soak run"),
    (["soak", "small-file-dataset", "--duration", "10s", "--target", "{tmp}", "--stall", "0"], "'--stall': must be > 0"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, words):
    other = RunDir.create(tmp_path, "run")
    other.path.rename(tmp_path / "other-run")
    (tmp_path / "other-run" / "results.json").write_text('{"command": "run"}')
    done = fxprobe(tmp_path, capsys, *[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert not (tmp_path / "runs").exists()        # nothing was started


def test_resume_of_a_finished_soak_is_refused(tmp_path, capsys):
    run = RunDir.create(tmp_path, "soak")
    (run.path / soak.STATE).write_text(json.dumps({"command": "soak", "config": {
        "profile": "small-file-dataset", "target": str(tmp_path), "planned_s": 10}}))
    (run.path / soak.RECORDS).write_text("")
    (run.path / "results.json").write_text('{"command": "soak"}')
    done = fxprobe(tmp_path, capsys, "soak", "--resume", str(run.path))
    assert done.returncode == 2 and "finished already" in done.stderr


def test_resume_after_the_planned_time_marks_the_gap_and_closes_open_interruptions(tmp_path):
    run = RunDir.create(tmp_path, "soak")
    config = soak.SoakConfig("small-file-dataset", str(tmp_path), 10.0)
    m = soak.Monitor(stall_s=5)
    records = [{"type": "start", "ts": 100.0, "profile": "small-file-dataset", "target": str(tmp_path),
                "planned_s": 10.0, "stall_s": 5, "sample_s": 10}, {"type": "segment", "seg": 1, "ts": 100.0}]
    records += m.new_segment(1, 100.0)
    for t in range(101, 111):
        records += m.observe(P(t, t - 100))
    records += m.paths({"nvme1": {"state": "live", "transport": "tcp"}}, {}, 110.5)   # lost, never back
    (run.path / soak.RECORDS).write_text("".join(json.dumps(r) + "\n" for r in records) + '{"type":"sam')
    SoakState(config=config, segments=1).write(run.path / soak.STATE)
    (run.path / "commands.jsonl").write_text("")
    loaded_run, loaded = soak.load_state(run.path)
    assert loaded.config == config and loaded.segments == 1
    summary = soak.Soak(loaded_run, None, loaded.config, state=loaded).resume(soak.kill_orphan(loaded.fio))
    assert summary.completed and summary.samples == 10 and summary.duration_s == 10.0 and summary.resumes == 1
    lost, gap = summary.interruptions
    assert lost.kind == "path-lost" and lost.end is not None and "end not observed" in lost.detail
    assert gap.kind == "gap" and gap.start == soak.stamp(110.5) and gap.seconds > 0
    assert soak.read_records(run.path / soak.RECORDS)[:len(records)] == records   # torn line cut, prefix kept


def test_runner_start_can_hand_stdout_over_as_a_pipe(tmp_path):
    from fxprobe.core.runner import Runner
    run = RunDir.create(tmp_path, "pipe")
    background = Runner(run).start([sys.executable, "-c", "print('{\\n}')"], label="py", stdout_pipe=True)
    assert background.process.stdout.read() == b"{\n}\n"
    background.process.stdout.close()
    assert background.wait(timeout=30) == 0
    [record] = list(run.commands())
    assert record["stdout"] is None and record["exit_code"] == 0 and record["argv"][0] == sys.executable


def test_a_soak_state_of_the_wrong_shape_is_one_line_naming_the_field(tmp_path, capsys):
    run = RunDir.create(tmp_path, "soak")
    (run.path / soak.STATE).write_text(json.dumps({"command": "soak", "segments": "two", "config": {
        "profile": "small-file-dataset", "target": str(tmp_path), "planned_s": 10}}))
    (run.path / soak.RECORDS).write_text("")
    (run.path / "commands.jsonl").write_text("")
    done = fxprobe(tmp_path, capsys, "soak", "--resume", str(run.path))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "soak-state.json" in done.stderr and "segments" in done.stderr, done.stderr


def test_a_stall_limit_longer_than_g4_accepts_is_warned_at_the_start(tmp_path, capsys, monkeypatch):
    from fxprobe.cli.soak import _warn_stall_above_g4
    monkeypatch.chdir(tmp_path)                       # no ./gates.toml: the buyer's 5 s
    _warn_stall_above_g4(5.0)
    assert capsys.readouterr().err == ""
    _warn_stall_above_g4(3600.0)
    err = capsys.readouterr().err
    assert err.startswith("WARNING: --stall 3600 s is longer than G4 accepts (g4.soak_stall_max_s = 5 s, built-in "
                          "defaults): stalls of 5-3600 s go unrecorded and G4 will FAIL this soak")
    (tmp_path / "gates.toml").write_text("[g4]\nsoak_stall_max_s = 10.0\n")      # the gates file G4 will judge with
    _warn_stall_above_g4(8.0)
    assert capsys.readouterr().err == ""
