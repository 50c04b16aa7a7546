#!/usr/bin/env python3
"""Issue 17 measurement: `fxprobe rehearse --hosts N` from lab up to signed report, on this machine.

Runs the rehearsal (it boots its own lab, an array and N host guests, in a private lab folder), samples
memory and load every second meanwhile, and prints: wall time, the lab's boot and ready times (its
state.json timings), each step's seconds, peak memory used on the machine over the start and the peak RSS
of the lab's QEMU processes, the lowest memory available, the 1-minute load, the rehearsal's exit code,
G3's rows of both gate tables with their criteria, and G3's read-back (nodes, aggregate, json+ and
hist-log percentiles, per-node figures, the straggler view). Run it alone (nothing else labs meanwhile):

    scripts/bench_lab_hosts.py --hosts 8 [--soak 60s] [--json]      (or: scripts/bench hosts ...)

``--readback`` measures the lab and G3 alone instead: `lab up` with the rehearsal's lab spec and N hosts
under /usr/bin/time -v with the same sampling (ready time, peak memory), then G3's multi-node read-back
(the rehearsal's `fxprobe run ... --nodes host1,...` line) on it, its merged hist-log p50/p99 against
tests/histref.py's independent merge of the same raw logs and G3's criteria under both gate files, then
lab down.

``--capture DIR`` also writes the G3 read-back's evidence as test fixtures (what
tests/test_hosts8_fixture.py and tests/test_common_span.py read): its results.json, every clat_hist and bw
log gzipped, the G3 rows of both gate runs, and a README with this command line and the run's figures.
Regenerate them with

    scripts/bench_lab_hosts.py --hosts 8 --capture tests/fixtures/hosts8
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
LAB = "rehearse"            # the rehearsal's own lab name, in this bench's private lab folder


def qemu_rss(marker: str) -> int:
    total = 0
    for process in psutil.process_iter(["name", "cmdline", "memory_info"]):
        try:
            cmdline = process.info.get("cmdline") or []
            if (process.info.get("name") or "").startswith("qemu-system") and any(marker in p for p in cmdline):
                total += process.info["memory_info"].rss
        except (psutil.Error, TypeError):
            continue
    return total


class Sampler(threading.Thread):
    """Every second: memory used over the start, the lab's QEMU RSS, memory available, load, lab timings."""

    def __init__(self, lab_home: Path):
        super().__init__(daemon=True)
        self.lab_home, self.stop = lab_home, threading.Event()
        self.base_used = psutil.virtual_memory().used
        self.peak = {"used_mb_over_start": 0, "qemu_rss_mb": 0, "min_available_mb": 1 << 30, "load1_max": 0.0}
        self.timings: dict = {}

    def run(self) -> None:
        marker = str(self.lab_home / LAB) + "/"
        while not self.stop.is_set():
            memory = psutil.virtual_memory()
            self.peak["used_mb_over_start"] = max(self.peak["used_mb_over_start"], (memory.used - self.base_used) >> 20)
            self.peak["qemu_rss_mb"] = max(self.peak["qemu_rss_mb"], qemu_rss(marker) >> 20)
            self.peak["min_available_mb"] = min(self.peak["min_available_mb"], memory.available >> 20)
            self.peak["load1_max"] = max(self.peak["load1_max"], os.getloadavg()[0])
            try:
                self.timings.update(json.loads((self.lab_home / LAB / "state.json").read_text()).get("timings", {}))
            except (OSError, ValueError):
                pass
            self.stop.wait(1.0)


def g3_rows(steps: dict) -> dict:
    """G3's gate row and criteria from each `gate all` step of the rehearsal."""
    rows = {}
    for name, step in steps.items():
        if not name.startswith("gate all") or not step.get("run_dir"):
            continue
        gates = json.loads((Path(step["run_dir"]) / "results.json").read_text()).get("gates") or []
        for gate in gates:
            if gate["name"].startswith("G3"):
                rows[name] = {"gate": gate["name"], "outcome": gate["outcome"], "criteria": [
                    {k: c.get(k) for k in ("name", "outcome", "measured", "comparator", "threshold", "unit")}
                    for c in gate["criteria"]]}
    return rows


def readback(step_dir: Path) -> dict:
    workload = json.loads((step_dir / "results.json").read_text()).get("workload") or {}
    concurrent = workload.get("concurrent") or {}
    return {"nodes": workload.get("nodes"),
            "sum_of_rates_MBps": round((workload.get("bandwidth_bytes") or {}).get("mean", 0) / 1e6, 2),
            "common_span_aggregate_MBps": round(concurrent["aggregate_bps"] / 1e6, 2)
            if concurrent.get("aggregate_bps") is not None else None,
            "common_spans_s": [(s.get("span_s"), s.get("whole_s")) for s in concurrent.get("spans") or []],
            "fraction_of_ceiling_pct": workload["fraction_of_ceiling"] * 100        # None: no common span
            if workload.get("fraction_of_ceiling") is not None else None,
            "json_percentiles_ns": workload.get("percentiles_ns"), "latency_samples": workload.get("latency_samples"),
            "hist_logs": workload.get("hist_logs"), "node_figures": workload.get("node_figures"),
            "stragglers": [r.get("stragglers") for r in workload.get("repeats") or []]}


def capture(out: Path, step_dir: Path, result: dict, argv: list[str]) -> None:
    """The G3 read-back's evidence as fixtures: results.json, the clat_hist and bw logs gzipped, G3's gate rows."""
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("*_clat_hist.*"), *out.glob("*_bw.*")]:
        old.unlink()
    shutil.copy(step_dir / "results.json", out / "results.json")
    logs = sorted((step_dir / "raw").glob("*_clat_hist.*.log.*"))
    bw_logs = sorted((step_dir / "raw").glob("*_bw.*.log.*"))
    for log in logs + bw_logs:
        with open(log, "rb") as source, open(out / (log.name + ".gz"), "wb") as packed, \
                gzip.GzipFile(log.name, "wb", fileobj=packed, mtime=0) as target:
            shutil.copyfileobj(source, target)
    (out / "g3-gates.json").write_text(json.dumps(result["g3"], indent=2) + "\n")
    figures = {k: result[k] for k in ("wall_s", "lab_timings", "peak", "load_start", "load_end", "hosts")}
    (out / "README.md").write_text(
        "# G3 read-back of an 8-host lab rehearsal (captured evidence)\n\n"
        f"Written by `{' '.join(argv)}` (scripts/bench_lab_hosts.py), run alone on the lab machine; "
        "tests/test_hosts8_fixture.py and tests/test_common_span.py read it.\n\n"
        f"- `results.json`: the rehearsal's G3 step (`fxprobe run ... --nodes host1,...,host{result['hosts']}`) as "
        "written\n"
        f"- `*_clat_hist.N.log.<address>.gz`: its {len(logs)} clat_hist logs as fio's client wrote them, gzipped\n"
        f"- `*_bw.N.log.<address>.gz`: its {len(bw_logs)} bw logs (what G3's common-span aggregate is computed from), "
        "gzipped\n"
        "- `g3-gates.json`: G3's row and criteria in both gate runs of the rehearsal\n\n"
        f"The bench's figures for that run: `{json.dumps(figures)}`\n")


def fxprobe(runs: Path, lab_home: Path, *argv: str, wrap: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([*wrap, sys.executable, "-m", "fxprobe.cli.main", "--runs", str(runs), "--json", *argv],
                          capture_output=True, text=True, cwd=ROOT, env={**os.environ, "FXPROBE_LAB_HOME": str(lab_home)})


def take_down(runs: Path, lab_home: Path, lab: str) -> None:
    """The lab down if it is still up (a rehearsal takes its own down; one that stopped early may not)."""
    if (lab_home / lab / "state.json").exists():
        fxprobe(runs, lab_home, "lab", "down", "--lab", lab)


def time_v(stderr: str) -> dict:
    """/usr/bin/time -v's wall clock and maximum RSS (of fxprobe itself: QEMU runs detached, see the sampler)."""
    found = {}
    for line in stderr.splitlines():
        key, _, value = line.strip().rpartition(": ")
        if key == "Maximum resident set size (kbytes)":
            found["fxprobe_max_rss_mb"] = int(value) >> 10
        elif key.startswith("Elapsed (wall clock) time"):
            parts = [float(x) for x in value.split(":")]
            found["elapsed_s"] = round(sum(x * 60 ** i for i, x in enumerate(reversed(parts))), 1)
    return found


def up_timings(stdout: str) -> dict:
    """The lab's timings from `lab up --json` (the sampler reads state.json once a second and may miss the last)."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return {}
    found = data.get("timings") or (data.get("lab") or {}).get("timings") or (data.get("state") or {}).get("timings")
    return found if isinstance(found, dict) else {}


def independent_check(step_dir: Path, workload: dict) -> dict:
    """The recorded hist-log p50/p99 against tests/histref.py's independent merge of the same raw logs."""
    sys.path.insert(0, str(ROOT / "tests"))
    import histref
    from fxprobe.tools import fio
    logs = sorted((step_dir / "raw").glob("*_clat_hist.*.log*"))
    recorded = workload.get("hist_logs") or {}
    merged = histref.independent_merge(logs, 3, fio.hist_bin_values_ns(fio.PLAT_NR, 0), fio_client=True)[0]
    check = {"files": len(logs), "independent_samples": sum(merged.values()),
             "recorded_samples": recorded.get("samples"), "json_samples": workload.get("latency_samples"),
             "problem": recorded.get("problem")}
    if hasattr(histref, "client_log_falls"):
        check["independent_falls"] = histref.client_log_falls(logs, 3)
    for percent in (50, 99):
        check[f"p{percent}_ns"] = {"fxprobe": (recorded.get("percentiles_ns") or {}).get(f"p{percent}"),
                                   "independent": histref.numpy_percentile(merged, percent) if merged else None,
                                   "json+": (workload.get("percentiles_ns") or {}).get(f"p{percent}")}
    check["equal"] = not check["problem"] and all(
        check[f"p{p}_ns"]["fxprobe"] == check[f"p{p}_ns"]["independent"] for p in (50, 99))
    return check


def g3_judged(step_dir: Path) -> dict:
    """G3's "nodes sharing one array" with the buyer's gates.toml and the lab-scaled gates-lab.toml."""
    from fxprobe.gates.catalog import judge_all
    from fxprobe.gates.config import LAB_FILE, load_config
    judged = {}
    for name, config in (("gates.toml", ROOT / "gates.toml"), ("gates-lab.toml", LAB_FILE)):
        _, results, _ = judge_all([step_dir], load_config(config))
        for gate in results["gates"]:
            if gate["name"].startswith("G3"):
                judged[name] = {c["name"]: (c["outcome"], c.get("measured"), c.get("threshold"))
                                for c in gate["criteria"]}
    return judged


def readback_mode(args, runs: Path, lab_home: Path) -> dict:
    """`lab up` with the rehearsal's lab spec and --hosts N, timed and sampled; then G3's multi-node read-back
    (the rehearsal's command line) on it, checked against an independent merge; then lab down."""
    from fxprobe.lab.rehearse import G3_CHUNK_TOKENS, G3_STREAMS, LAB_SPEC, LOAD_PROFILE
    from fxprobe.lab.spec import LabSpec
    spec = {**LAB_SPEC, "hosts": args.hosts}
    ceiling_gbps = LabSpec(name=LAB, **spec).link_speed / 1000
    up = ["lab", "up", "--lab", LAB, *[x for k, v in spec.items() for x in (f"--{k.replace('_', '-')}", str(v))]]
    sampler = Sampler(lab_home)
    result: dict = {"mode": "readback", "hosts": args.hosts, "load_start": os.getloadavg(), "lab_up": " ".join(up)}
    sampler.start()
    start = time.monotonic()
    done = fxprobe(runs, lab_home, *up, wrap=("/usr/bin/time", "-v"))
    result.update(up_wall_s=round(time.monotonic() - start, 1), up_exit=done.returncode, up_time_v=time_v(done.stderr))
    sampler.stop.set()
    sampler.join()
    result.update(lab_timings={**sampler.timings, **up_timings(done.stdout)}, up_peak=dict(sampler.peak))
    try:
        if done.returncode != 0:
            result["up_stderr_tail"] = done.stderr[-1500:]
            return result
        nodes = [f"host{i}" for i in range(1, args.hosts + 1)]
        threads = max(1, G3_STREAMS // len(nodes))
        run = ["run", LOAD_PROFILE, "--target", "/dev/nvme0n1", "--lab", LAB, "--nodes", ",".join(nodes),
               "--repeats", "1", "--runtime", "5", "--ramp", "1", "--size", "64M", "--ceiling", str(ceiling_gbps), "--no-layout",
               "--set", f"threads={threads}", "--set", f"chunk_tokens={G3_CHUNK_TOKENS}"]
        start = time.monotonic()
        done = fxprobe(runs, lab_home, *run)
        result.update(run_wall_s=round(time.monotonic() - start, 1), run_exit=done.returncode, run=" ".join(run),
                      load_after_run=os.getloadavg())
        folders = sorted(runs.glob("*-run"))
        if not folders:
            result["run_stderr_tail"] = done.stderr[-1500:]
            return result
        workload = json.loads((folders[-1] / "results.json").read_text()).get("workload") or {}
        result.update(run_dir=str(folders[-1]), readback=readback(folders[-1]),
                      independent=independent_check(folders[-1], workload), g3=g3_judged(folders[-1]))
        return result
    finally:
        take_down(runs, lab_home, LAB)


def rehearse_mode(args, runs: Path, lab_home: Path) -> dict:
    sampler = Sampler(lab_home)
    load_start = os.getloadavg()
    sampler.start()
    start = time.monotonic()
    done = fxprobe(runs, lab_home, "rehearse", "--hosts", str(args.hosts), "--soak", args.soak)
    wall = time.monotonic() - start
    sampler.stop.set()
    sampler.join()
    take_down(runs, lab_home, LAB)
    result = {"mode": "rehearse", "hosts": args.hosts, "soak": args.soak, "wall_s": round(wall, 1),
              "exit_code": done.returncode, "lab_timings": sampler.timings, "peak": sampler.peak,
              "load_start": load_start, "load_end": os.getloadavg(), "cpus": os.cpu_count(), "run": None}
    folders = sorted(runs.glob("*-rehearse"))
    if folders:
        rehearsal = json.loads((folders[-1] / "results.json").read_text())
        steps = {s["name"]: s for s in rehearsal.get("steps") or []}
        result.update(run=str(folders[-1]), outcome=rehearsal.get("outcome"),
                      steps={name: s.get("seconds") for name, s in steps.items()}, g3=g3_rows(steps))
        g3_step = steps.get("multi-node read-back", {}).get("run_dir")
        if g3_step:
            workload = json.loads((Path(g3_step) / "results.json").read_text()).get("workload") or {}
            result["readback"] = readback(Path(g3_step))
            result["independent"] = independent_check(Path(g3_step), workload)
            if args.capture:
                capture(args.capture, Path(g3_step), result, [Path(sys.argv[0]).name, *sys.argv[1:]])
    else:
        result["stderr_tail"] = done.stderr[-1500:]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--soak", default="60s")
    parser.add_argument("--readback", action="store_true",
                        help="instead of the rehearsal: lab up (timed, memory sampled), G3's read-back on it, lab down")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--capture", type=Path, default=None, metavar="DIR")
    parser.add_argument("--keep", action="store_true", help="keep the run folder (printed) instead of removing it")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="bench-lab-hosts-"))
    runs, lab_home = work / "runs", work / "labs"
    result = (readback_mode if args.readback else rehearse_mode)(args, runs, lab_home)
    result.update(work=str(work) if args.keep else None, load_end=os.getloadavg())
    print(json.dumps(result, indent=2) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    code = result.get("exit_code", result.get("run_exit", result.get("up_exit")))
    return 0 if code in (0, 1) else code


if __name__ == "__main__":
    sys.exit(main())
