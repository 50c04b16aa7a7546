"""The live status line of a lab fault run on a pseudo-terminal (issue 16, Must-show 2).

``fxprobe fault run link-down --lab`` runs with its stderr on a pty (python's pty module, no tmux
needed): the rich line must show the phase, the % done and the ETA as the run goes, and the fault
must appear within seconds of its injection. The off-terminal half (one plain line per interval)
is checked on a real soak in tests/test_soak_lab.py and without the lab in
tests/test_live_status.py.
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

import pytest

from test_fault_lab import env, fxprobe_argv, reload_state, scenario_file

pytestmark = pytest.mark.lab

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07|\r")
PROGRESS = re.compile(r"(\d+)% ETA (\d+):(\d\d):(\d\d) \(ends \d\d:\d\d:\d\d UTC\)")


def test_fault_run_live_line_on_a_pty_shows_phase_percent_eta_and_the_fault_as_it_happens(lab, tmp_path):
    # fault_s 22: longer than the stall with default timeouts (~15 s), so the same run also shows the
    # failover to the second path and the advice it leads to (no separate two-path run in test_fault_lab)
    scenario = scenario_file(tmp_path, "link-down", timing={"steady_s": 6, "settle_s": 2, "fault_s": 22,
                                                            "recover_s": 4})
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
    process = subprocess.Popen(fxprobe_argv(tmp_path, "fault", "run", str(scenario), "--lab", lab.name),
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
    result = json.loads(out)                       # --json: stdout holds the JSON alone, the line went to the pty
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
    # the two-path cut with default timeouts: no errors, the advice after a visible cut, both paths back
    print(f"\nlink-down, 2 paths, default timeouts: stall {result['impact']['longest_stall_s']} s, "
          f"verdict {result['verdict']}")
    assert result["live_paths_before"] == 2 and result["impact"]["errors"] == 0
    assert process.returncode == (0 if result["verdict"] == "invisible" else 1)
    if result["verdict"] == "visible":
        assert result["advice"] and any("kato" in line for line in result["advice"]["lines"])
    from fxprobe.faults.labprep import controllers_of
    assert len([p for p in controllers_of(lab, "host1", lab.main_export.nqn) if p["state"] == "live"]) == 2
