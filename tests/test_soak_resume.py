"""kill -9 of fxprobe half-way through a soak, then --resume: no recorded sample is lost, the gap is marked.

Runs the real CLI and the real fio on a directory target (no lab needed).
"""

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from fxprobe import soak
from fxprobe.soak.state import FioState


def cli(*args):
    return [sys.executable, "-m", "fxprobe.cli.main", *args]


def lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


def wait_for_samples(path, count, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().count('"type":"sample"') >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} samples in {path} after {timeout} s")


@pytest.mark.alone   # the soak's own stall watch runs: only the gap may be an interruption
def test_kill_9_then_resume_loses_no_recorded_sample(tmp_path):
    target, run_dir = tmp_path / "target", tmp_path / "run"
    target.mkdir()
    planned = 8                                     # killed ~3 s in: more than END_TOLERANCE_S is left to resume
    first = subprocess.Popen(cli("--run-dir", str(run_dir), "soak", "small-file-dataset", "--duration", f"{planned}s",
                                 "--target", str(target), "--size", "8M", "--sample", "1"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    records = run_dir / soak.RECORDS
    try:
        wait_for_samples(records, 3)
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=30)
    killed_at = time.time()
    before = records.read_bytes()
    fio_state = json.loads((run_dir / soak.STATE).read_text())["fio"]

    done = subprocess.run(cli("--json", "soak", "--resume", str(run_dir)), capture_output=True, text=True,
                          timeout=300)
    assert "Traceback" not in done.stderr
    assert done.returncode == 1, done.stderr        # the gap is an interruption: G4 must not pass
    after = records.read_bytes()
    assert after.startswith(before)                 # the recorded prefix is byte for byte unchanged

    old, new = lines(before), lines(after)
    old_samples = [r for r in old if r["type"] == "sample"]
    new_samples = [r for r in new if r["type"] == "sample"]
    assert len(old_samples) >= 3 and len(new_samples) > len(old_samples)
    assert new_samples[:len(old_samples)] == old_samples
    stamps = [r["ts"] for r in new_samples]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps)

    [gap] = [r for r in new if r["type"] == "interruption" and r["kind"] == "gap"]
    [resume] = [r for r in new if r["type"] == "resume"]
    last_before = max(r.get("ts") or r.get("start_ts") or 0 for r in old)
    assert gap["start_ts"] == last_before and last_before <= killed_at
    assert killed_at <= gap["end_ts"] <= resume["ts"] + 1
    assert min(r["ts"] for r in new_samples[len(old_samples):]) > gap["end_ts"]
    assert fio_state["jobs"]                        # fio's job processes were known before the kill
    for process in [fio_state] + fio_state["jobs"]:  # and none of them outlived the resume
        assert not psutil.pid_exists(process["pid"]) or \
            psutil.Process(process["pid"]).cmdline() != fio_state["argv"]

    # the data is verified throughout (issue 14 Must-show 4): every sample carries the bytes its segment verified;
    # the resume writes the killed segment's verify record from that fio's stderr, the new segment verifies on
    assert all("verified" in s and s["mismatches"] == 0 for s in new_samples)
    assert old_samples[-1]["verified"] > 0 and new_samples[-1]["verified"] > 0
    verifies = [r for r in new if r["type"] == "verify"]
    assert [v.get("seg") for v in verifies] == [1, 2, None]            # killed segment, resumed one, read-back
    assert verifies[0]["source"] == "load (read after the restart)"
    assert verifies[0]["verified_bytes"] == old_samples[-1]["verified"] and verifies[0]["mismatches"] == 0
    result = json.loads(done.stdout)
    assert result["verified_bytes"] == sum(v["verified_bytes"] for v in verifies) and result["mismatches"] == 0
    assert {c["name"]: c for c in result["verdict"]["criteria"]}["data verified (mismatches)"]["outcome"] == "pass"
    assert result["command"] == "soak" and result["samples"] == len(new_samples)
    assert result["resumes"] == 1 and result["segments"] == 2
    assert [i["kind"] for i in result["interruptions"]] == ["gap"]
    assert result["interruptions"][0]["seconds"] > 0
    assert planned - soak.END_TOLERANCE_S <= result["duration_s"] <= planned + soak.END_TOLERANCE_S
    assert result["verdict"]["outcome"] == "fail"


def test_kill_orphan_checks_the_command_line_before_killing(tmp_path):
    argv = ["sleep", "60"]
    process = subprocess.Popen(argv, start_new_session=True)
    try:
        deadline = time.monotonic() + 10                 # under load the fork may not have exec'd sleep yet
        while psutil.Process(process.pid).cmdline() != argv and time.monotonic() < deadline:
            time.sleep(0.05)
        created = psutil.Process(process.pid).create_time()
        assert "no orphaned" in soak.kill_orphan(FioState(pid=process.pid, argv=["fio", "x"], create_time=created))
        assert process.poll() is None                  # a different command line: left alone
        assert "stopped" in soak.kill_orphan(FioState(pid=process.pid, argv=argv, create_time=created))
        assert process.wait(timeout=10) is not None
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


@pytest.mark.alone   # the interruption starts at fio's last report, within 3 s of the kill measured here
def test_fio_dying_before_the_end_is_an_interruption_and_the_load_goes_on(tmp_path):
    target, run_dir = tmp_path / "target", tmp_path / "run"
    target.mkdir()
    planned = 7                                     # killed ~2 s in: more than END_TOLERANCE_S is left to restart
    soak_cli = subprocess.Popen(cli("--json", "--run-dir", str(run_dir), "soak", "small-file-dataset", "--duration",
                                    f"{planned}s", "--target", str(target), "--size", "8M"),
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_for_samples(run_dir / soak.RECORDS, 2)
        fio_pid = json.loads((run_dir / soak.STATE).read_text())["fio"]["pid"]
        killed_at = time.time()
        os.killpg(fio_pid, signal.SIGKILL)          # fio's main process (its jobs run in sessions of their own)
        out, _ = soak_cli.communicate(timeout=300)
    finally:
        if soak_cli.poll() is None:
            soak_cli.kill()
    assert soak_cli.returncode == 1
    result = json.loads(out)
    [died] = [i for i in result["interruptions"] if i["kind"] == "fio-exit"]
    assert "fio exited with code" in died["detail"] and "load restarted (segment 2)" in died["detail"]
    start = dt.datetime.fromisoformat(died["start"].replace("Z", "+00:00")).timestamp()
    assert killed_at - 3 <= start <= killed_at and died["seconds"] > 0   # from fio's last report to the restart
    assert result["segments"] == 2 and result["completed"]
    assert result["duration_s"] >= planned - soak.END_TOLERANCE_S
