"""A load that outlives its planned end is declared hung (faults.overrun): a real process stands for it."""

from __future__ import annotations

import time
from pathlib import Path

from fxprobe.core.hosts import LOCAL
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome
from fxprobe.faults import overrun

FIXTURES = Path(__file__).parent / "fixtures"


def test_a_load_that_ends_in_time_is_not_hung():
    runner = Runner()
    load = runner.start(["sleep", "0.2"], label="load")
    assert overrun.wait_or_declare_hung(load, time.time(), runner, LOCAL,
                                        {}, lambda: "not called") is None


def test_a_load_past_its_planned_end_plus_grace_is_stopped_and_fails_the_verdict(monkeypatch, tmp_path):
    monkeypatch.setattr(overrun, "GRACE_S", 0.5)
    monkeypatch.setattr(overrun, "STOP_WAIT_S", 5.0)
    runner, said = Runner(), []
    load = runner.start(["sleep", "600"], label="load")
    began = time.monotonic()
    hung = overrun.wait_or_declare_hung(load, time.time(), runner, LOCAL, {"local": LOCAL},
                                        lambda: (load.stop(timeout=5), "stopped by the test")[1], said.append)
    assert hung is not None and hung.ended and not load.alive()
    assert time.monotonic() - began < 10
    assert 0.5 <= hung.waited_s < 5 and hung.stopped == "stopped by the test"
    assert "local" in hung.kernel          # dmesg may be refused here: then its failure is the evidence
    item = hung.criterion()
    assert item.outcome == Outcome.FAIL and item.name == "load ended by its planned end + grace"
    assert "still running" in item.line() and "grace 0.5 s" in item.line()
    assert said[0].startswith("the load is still running")


def test_parse_ps_keeps_pid_state_and_wait_channel():
    text = "  4121 Ssl  hrtimer_nanosleep               fio\n  4130 Ds   io_schedule                     fio\n"
    assert overrun.parse_ps(text) == "4121 Ssl hrtimer_nanosleep, 4130 Ds io_schedule"
    assert overrun.parse_ps("") == ""


def test_a_load_silent_before_the_fault_is_an_error_that_keeps_what_it_waited_on(tmp_path):
    """Before any fault (CI once: a fresh twin's fio never reported in 180 s), there is no verdict to give:
    the error carries the load's processes and kernel messages, each command kept as evidence."""
    from fxprobe.core.rundir import RunDir
    from fxprobe.faults import engine
    run = RunDir.create(tmp_path, "fault-run")
    runner = Runner(run)
    load = runner.start(["sleep", "600"], label="load")
    try:
        assert engine.wait_first_status(load, 0.3) is None
        processes, kernel = overrun.hang_evidence(runner, LOCAL, {"local": LOCAL}, "load-silent")
    finally:
        load.stop(timeout=5)
    line = overrun.silent_load_line(180, processes, kernel)
    assert line.startswith("the load did not report within 180 s, before any fault was injected (no verdict")
    assert "local kernel: " in line      # dmesg's lines, or its refusal here: either is the evidence
    labels = (run.path / "commands.jsonl").read_text()
    assert "load-silent-ps" in labels and "load-silent-dmesg-local" in labels


def test_the_kernel_lines_kept_for_a_hung_load_name_the_drive_that_stalled():
    """The array guest's dmesg when a lab load hung (a CI-like run: one emulated drive stopped completing I/O; the
    last messages were nvmet keep-alive expiries, which name no cause): the stall lines are the ones quoted."""
    text = (FIXTURES / "overrun" / "array-dmesg-drive-stall.txt").read_text()
    assert "nvme20" not in " ".join(text.strip().splitlines()[-3:])     # what was quoted before
    lines = overrun.last_kernel_lines(text)
    assert len(lines) == 3 and all("nvme nvme20:" in line for line in lines), lines
    assert any("timeout, aborting" in line for line in lines)
    assert overrun.last_kernel_lines("[ 1.0] a\n[ 2.0] b\n[ 3.0] c\n[ 4.0] d\n") == ["[ 2.0] b", "[ 3.0] c", "[ 4.0] d"]
