#!/usr/bin/env python3
"""Issue 17.1 measurement: `fxprobe rehearse --hosts N` from lab up to signed report, on this machine.

Runs the rehearsal (it boots its own lab with N host guests), samples memory every second meanwhile, and
prints: wall time, the lab's ready time (its state.json timings), peak memory used on the machine and peak
RSS of the lab's QEMU processes, the rehearsal's exit code and G3's nodes. Run it with no other lab (or
other heavy load) on the machine, so the wall time and memory are its own:

    scripts/bench_lab_hosts.py --hosts 8 [--soak 30s] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent


def qemu_rss(marker: str) -> int:
    total = 0
    for process in psutil.process_iter(["name", "cmdline", "memory_info"]):
        cmdline = process.info.get("cmdline") or []
        if process.info.get("name", "").startswith("qemu-system") and any(marker in part for part in cmdline):
            total += process.info["memory_info"].rss
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--soak", default="30s")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="bench-lab-hosts-"))
    lab_home = Path(os.environ.get("FXPROBE_LAB_HOME") or Path.home() / ".local/state/fxprobe/labs")
    peak = {"used_mb": 0, "qemu_rss_mb": 0, "ready_s": None}
    base_used = psutil.virtual_memory().used
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            peak["used_mb"] = max(peak["used_mb"], (psutil.virtual_memory().used - base_used) >> 20)
            peak["qemu_rss_mb"] = max(peak["qemu_rss_mb"], qemu_rss("labs/rehearse/") >> 20)
            try:
                timings = json.loads((lab_home / "rehearse" / "state.json").read_text()).get("timings", {})
                peak["ready_s"] = timings.get("ready_s", peak["ready_s"])
            except (OSError, ValueError):
                pass
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", str(runs), "--json", "rehearse",
                           "--hosts", str(args.hosts), "--soak", args.soak], capture_output=True, text=True,
                          cwd=ROOT)
    wall = time.monotonic() - start
    stop.set()
    sampler.join()
    result = {"hosts": args.hosts, "wall_s": round(wall, 1), "lab_ready_s": peak["ready_s"],
              "peak_used_mb_over_start": peak["used_mb"], "peak_qemu_rss_mb": peak["qemu_rss_mb"],
              "exit_code": done.returncode, "load": os.getloadavg(), "runs": str(runs)}
    try:
        data = json.loads(done.stdout)
        result["outcome"] = data.get("outcome")
    except ValueError:
        result["stderr_tail"] = done.stderr[-500:]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")
    return 0 if done.returncode in (0, 1) else done.returncode


if __name__ == "__main__":
    sys.exit(main())
