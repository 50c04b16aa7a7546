"""The live status line of a lab fault run on a pseudo-terminal (issue 16, Must-show 2), watched on the run of the
single-path link cut - the planted fail twin of link-down, whose exact stall (issue 14, Must-show 2) is checked on
the same run against the raw per-I/O log.

``fxprobe fault run link-down-single-path --lab`` runs with its stderr on a pty (python's pty module, no tmux
needed): the rich line must show the phase, the % done and the ETA as the run goes, and the fault must appear
within seconds of its injection. The off-terminal half (one plain line per interval) is checked on a real soak in
tests/test_soak_lab.py and without the lab in tests/test_live_status.py. The two-path cut with default timeouts
and its advice: tests/test_fault_lab.py.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import struct
import subprocess
import termios
import threading
import time
from pathlib import Path

import pytest

from labcli import raw_completions
from test_fault_lab import env, fxprobe_argv, reload_state, scenario_file

pytestmark = pytest.mark.lab

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
PROGRESS = re.compile(r"(\d+)% ETA (\d+):(\d\d):(\d\d) \(ends \d\d:\d\d:\d\d UTC\)")


def run_on_a_pty(lab, tmp_path, scenario, *extra: str) -> tuple[int, dict, list[tuple[float, str]]]:
    """`fxprobe --json fault run SCENARIO --lab LAB EXTRA` with its stderr on a pty 220 columns wide: (exit code,
    the JSON result from stdout, what the terminal received and when)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 220, 0, 0))   # wide: one line, no wrap
    chunks: list[tuple[float, str]] = []

    def read():
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            chunks.append((time.time(), data.decode("utf-8", "replace")))
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    process = subprocess.Popen(fxprobe_argv(tmp_path, "fault", "run", str(scenario), "--lab", lab.name, *extra),
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave,
                               env={**env(tmp_path), "TERM": "xterm-256color", "COLUMNS": "220"})
    os.close(slave)
    try:
        out, _ = process.communicate(timeout=300)
    finally:
        if process.poll() is None:
            process.kill()
        reload_state(lab)
    reader.join(timeout=5)
    os.close(master)
    return process.returncode, json.loads(out), chunks   # --json: stdout holds the JSON alone, the line went to the pty


def test_single_path_cut_on_a_pty_shows_phase_percent_eta_and_the_fault_and_its_stall_equals_the_raw_log_gap(
        lab, tmp_path):
    scenario = scenario_file(tmp_path, "link-down-single-path", timing={"steady_s": 5, "settle_s": 1, "fault_s": 3,
                                                                        "recover_s": 3}, load={"region": "2M"})
    code, result, chunks = run_on_a_pty(lab, tmp_path, scenario, "--allow-visible")
    # the live line (issue 16, Must-show 2)
    screen = [(t, ANSI.sub("\n", text)) for t, text in chunks]
    text = "".join(s for _, s in screen)
    assert "Traceback" not in text
    assert "\x1b[" in "".join(c for _, c in chunks), "rich redraws the line in place on a terminal"
    for phase in ("steady (before the fault)", "fault: link-down", "recovery (after the restore)"):
        assert f"fault run: {phase}" in text, phase
    done = [int(m.group(1)) for m in PROGRESS.finditer(text)]
    assert done and done[-1] >= 90 and done == sorted(done) and len(set(done)) > 5, done
    eta = [int(h) * 3600 + int(m) * 60 + int(s) for _, h, m, s in PROGRESS.findall(text)]
    assert eta[0] > eta[-1] and eta[-1] <= 3, eta
    assert re.search(r"[\d,.]+ MB/s [\d,]+ IOPS p99 [\d.]+ (us|ms)", text), text[-2000:]
    # the fault appears as it happens: the line counts it and a line above names it, seconds after injection
    seen = next(t for t, s in screen if "faults: link-down 1" in s or "fault link-down" in s)
    injected = result["instants"]["inject_requested_ms"] / 1000 - result["clock"]["offset_s"]
    assert -0.5 <= seen - injected <= 3.0, (seen, injected)
    assert "fault link-down on host1: via " in text
    assert "now: link-down" in text

    # the planted twin of link-down: the only path cut -> VISIBLE by its stall, the advice names the single path,
    # the second path back after the run
    assert result["live_paths_before"] == 1 and Path(result["png"]).is_file()
    assert result["restore_failed"] == [], result["restore_failed"]
    assert "longest stall (no completed I/O)" in result["failed_criteria"]
    assert any("single path" in line for line in result["advice"]["lines"])
    from fxprobe.faults.labprep import controllers_of
    assert len(controllers_of(lab, "host1", lab.main_export.nqn)) == 2   # second path back
    # the exact stall (issue 14, Must-show 2): the longest stall reported equals, within 1 ms, the longest gap between
    # successful completions recomputed here from the raw per-I/O log
    impact = result["impact"]
    times = raw_completions(Path(result["png"]).parent)
    inject, end = impact["inject_ms"], impact["load_end_ms"]
    edges = [inject] + [t for t in times if inject < t < end] + [end]
    gap = max(b - a for a, b in zip(edges, edges[1:]))
    print(f"\nlink cut, one path: reported stall {impact['longest_stall_s']} s, recomputed {gap / 1000} s, "
          f"first effect {impact['first_affected_ms'] - inject} ms after the injection")
    assert abs(impact["longest_stall_s"] * 1000 - gap) <= 1
    assert impact["resolution_ms"] == 1 and result["verdict"] == "visible" and code == 1
    assert 0 <= impact["first_affected_ms"] - inject <= 1000 + 1000 * result["clock"]["uncertainty_s"]
