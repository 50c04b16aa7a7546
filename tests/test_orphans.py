"""Nothing left running after a crash (issue 18 item 4): loads journaled by pid and command line,
stopped by `fault restore` / the next `fault run` only when their run is gone; restores that fail are
reported as failed (issue 18 item 5). Real processes, no lab."""

import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from fxprobe.core.runner import Runner
from fxprobe.faults import engine, orphans
from fxprobe.faults.journal import Journal
from fxprobe.tools import procs


@pytest.fixture
def fake_sys(tmp_path, monkeypatch):
    from fxprobe.core import sysfs
    root = tmp_path / "root"
    monkeypatch.setattr(sysfs, "ROOT", root)
    return root


def unique_sleep(tmp_path, seconds=120):
    """A process with a command line nothing else has (as a fault run's fio, which names its log folder)."""
    argv = [sys.executable, "-c", "import time, sys; time.sleep(float(sys.argv[1]))", str(seconds), str(tmp_path)]
    return argv, subprocess.Popen(argv, start_new_session=True)


def dead_pid():
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_stop_load_stops_exactly_that_command_line(tmp_path):
    argv, process = unique_sleep(tmp_path)
    other_argv, other = unique_sleep(tmp_path / "other")
    try:
        assert procs.matching(argv, process.pid) == {"pid_runs_it": True, "pids": [process.pid]}
        result = procs.stop_load(argv, process.pid)
        assert result["found"] == [process.pid] and result["stopped"] == [process.pid] and result["left"] == []
        assert process.wait(timeout=10) is not None
        assert other.poll() is None            # a different command line is never touched
    finally:
        for p in (process, other):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_reused_pid_is_left_alone(tmp_path):
    argv, process = unique_sleep(tmp_path)
    try:
        result = procs.stop_load(["fio", "--name=gone", str(tmp_path)], process.pid)
        assert result == {"found": [], "stopped": [], "left": [], "pid_runs_it": False}
        assert "now runs another program" in procs.describe({"pid": process.pid, "argv": ["fio"]}, result)
        assert process.poll() is None
    finally:
        process.kill()
        process.wait()


def test_parse_stop_reads_the_result_line_and_refuses_other_text():
    assert procs.parse_stop('noise\n{"found": [1], "stopped": [1], "left": [], "pid_runs_it": true}\n')["found"] == [1]
    with pytest.raises(Exception):
        procs.parse_stop("Traceback ...")


def test_the_module_runs_as_a_command(tmp_path):
    argv, process = unique_sleep(tmp_path)
    try:
        out = subprocess.run([sys.executable, "-m", "fxprobe.tools.procs", "stop", json.dumps(argv), str(process.pid)],
                             capture_output=True, text=True, timeout=60, check=True).stdout
        assert procs.parse_stop(out)["stopped"] == [process.pid]
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()


def test_journal_keeps_loads_across_reopen_and_drops_them(tmp_path):
    journal = Journal(tmp_path / "fault-journal.json")
    journal.add_load("a", {"where": "this host", "pid": 5, "argv": ["fio"]}, "drive-pull", "/runs/x")
    journal.open("a", "drive-pull", [{"method": "lab-drive", "lab": "x", "slot": 1}], "/runs/x")
    [entry] = journal.entries()
    assert entry["loads"][0]["pid"] == 5 and entry["restores"] and entry["pid"] == os.getpid()
    assert entry["owner_started"] == pytest.approx(psutil.Process().create_time())
    journal.drop_load("a", 5)
    assert journal.entries()[0]["loads"] == []
    journal.open("a", "drive-pull", [], "/runs/x")
    journal.drop_load("a", 5)
    assert journal.entries() == [] and not journal.path.exists()


def test_orphans_of_a_dead_run_are_stopped_and_a_live_runs_left_alone(tmp_path):
    journal = Journal(tmp_path / "fault-journal.json")
    argv, process = unique_sleep(tmp_path / "dead")
    live_argv, live = unique_sleep(tmp_path / "live")
    try:
        journal.add_load("dead", {"where": "this host", "pid": process.pid, "argv": argv}, "link-down")
        journal.add_load("live", {"where": "this host", "pid": live.pid, "argv": live_argv}, "drive-pull")
        data = json.loads(journal.path.read_text())
        data["entries"][0]["pid"] = dead_pid()          # the run that started it was killed
        journal._write(data["entries"])
        lines = orphans.stop_orphans(journal, Runner(), say=lambda text: None)
        assert process.wait(timeout=10) is not None and live.poll() is None
        assert any(f"orphaned {sys.executable} on this host stopped (pid {process.pid}" in l for l in lines), lines
        assert any("left running" in l and "still running" in l for l in lines), lines
        assert [e["id"] for e in journal.entries()] == ["live"]
    finally:
        for p in (process, live):
            if p.poll() is None:
                p.kill()
                p.wait()


def test_a_load_in_a_lab_that_is_down_went_with_it_and_is_forgotten(tmp_path, monkeypatch):
    """A journaled load of a lab guest whose lab is down (no state file): its guest and processes are gone;
    said once, dropped from the journal (not 'could not check' at every later run)."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    journal = Journal(tmp_path / "fault-journal.json")
    journal.add_load("gone", {"lab": "vs", "guest": "host1", "where": "lab vs host1", "pid": 5090,
                              "argv": ["fio", "--name=load"]}, "drive-pull")
    data = json.loads(journal.path.read_text())
    data["entries"][0]["pid"] = dead_pid()
    journal._write(data["entries"])
    lines = orphans.stop_orphans(journal, Runner(), say=lambda text: None)
    assert lines == ["no orphaned fio on lab vs host1: lab vs is down (its guests' processes went with it)"]
    assert journal.entries() == []


def test_replay_stops_the_orphan_first_and_reports_a_failed_restore(tmp_path, fake_sys):
    (fake_sys / "sys/kernel/config/nullb/d1").mkdir(parents=True)
    (fake_sys / "sys/kernel/config/nullb/d1/power").write_text("0")
    journal = Journal(tmp_path / "fault-journal.json")
    argv, process = unique_sleep(tmp_path)
    try:
        journal.add_load("x", {"where": "this host", "pid": process.pid, "argv": argv}, "drive-pull")
        journal.open("x", "drive-pull", [{"method": "nullblk-power", "folder": "/sys/kernel/config/nullb/missing"},
                                         {"method": "nullblk-power", "folder": "/sys/kernel/config/nullb/d1"}])
        data = json.loads(journal.path.read_text())
        data["entries"][0]["pid"] = dead_pid()
        journal._write(data["entries"])
        failed = []
        done = engine.replay_journal(journal, Runner(), lambda text: None, failed)
        assert process.wait(timeout=10) is not None
        assert done[0].startswith("orphaned") and done[1] == "/sys/kernel/config/nullb/d1 powered on"
        assert len(failed) == 1 and "missing" in failed[0]
        [entry] = journal.entries()            # what is still broken stays in the journal
        assert [r["folder"] for r in entry["restores"]] == ["/sys/kernel/config/nullb/missing"]
        assert entry["loads"] == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_fault_restore_exits_4_naming_what_is_still_broken(tmp_path):
    path = tmp_path / "fault-journal.json"
    Journal(path).open("x", "drive-pull", [{"method": "nullblk-power", "folder": str(tmp_path / "no-such-nullb")}])
    env = {**os.environ, "FXPROBE_FAULT_JOURNAL": str(path)}
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "fault",
                           "restore"], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "FAILED: nullblk-power" in done.stdout and "no-such-nullb" in done.stdout
    assert "Traceback" not in done.stderr
    assert Journal(path).entries()[0]["restores"]


def test_the_start_line_names_the_pid_the_load_runs_as():
    """tools/startline.sh prints '<epoch> <pid>' and execs the load: the pid journaled is the load's own."""
    before = time.time()
    out = subprocess.run(procs.with_start_line([sys.executable, "-c", "import os; print(os.getpid())"]),
                         capture_output=True, text=True, timeout=30).stdout.split("\n")
    stamp, pid = out[0].split()
    assert before - 1 <= float(stamp) <= time.time() + 1 and pid == out[1]


def test_pkill_of_an_exact_command_line_stops_that_one_and_not_a_look_alike():
    """Remote fio servers are stopped by their exact command line (pkill -f -x): every regex character is literal."""
    target = [sys.executable, "-c", "import time; time.sleep(60)", "36.5", "a[x]^$(y)|z*+?{2}\\w"]
    decoy = [sys.executable, "-c", "import time; time.sleep(60)", "3605", "a[x]^$(y)|z*+?{2}\\w"]
    processes = [subprocess.Popen(argv) for argv in (target, decoy)]
    try:
        deadline = time.monotonic() + 10
        while any(procs.matching(argv)["pids"] == [] for argv in (target, decoy)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert subprocess.run(procs.pkill_argv(target), timeout=30).returncode == 0
        assert processes[0].wait(timeout=10) == -15 and processes[1].poll() is None
        assert subprocess.run(procs.pkill_argv(target), timeout=30).returncode == 1     # none left: exit 1
    finally:
        for process in processes:
            process.kill()
            process.wait()
