#!/usr/bin/env python3
"""Log analysis at fleet scale: fio logs of 8 and 64 hosts x 72 h, fxprobe against bare readers and fio2gnuplot.

Generates fio logs in a temp folder (removed at exit): 1 s bandwidth logs (epoch-ms stamps,
259,200 lines per host and 72 h) and latency histogram logs (``write_hist_log``, 1,856 bins,
one line per ``--hist-msec`` window). Each measurement runs in a fresh child process, so its
peak RSS is its own (interpreter and imports included: the ``imports`` line shows that part);
rounds are interleaved so drift hits every mode alike, and the median of ``--rounds`` counts.

Cases:
  bw     --hosts (8) bandwidth logs: bare readers of the same files (pandas.read_csv C engine, the
         reference; pandas with engine="pyarrow" and pyarrow.csv.read_csv when pyarrow is installed;
         polars.read_csv), ``fio2gnuplot -b`` (fio's own log tool, the Debian fio package's /usr/bin/fio2gnuplot)
         and fxprobe: ``tools.fio_logs.fleet_series`` (every file streamed, validated, the per-second
         sum over hosts and each host's stalled seconds).
  fleet  --fleet-hosts (64) bandwidth logs: fxprobe's peak RSS, beside pandas.read_csv holding them.
  hist   --hist-hosts (8) histogram logs: fxprobe ``tools.fio_logs.merge_hist_logs`` (bins summed per
         direction across hosts, p50/p99 by fio's rule) beside pandas.read_csv of each file in turn.
  sampler  the soak's 1 Hz sampler (host/telemetry.py: psutil counters, NVMe temperatures, path
         states and md state, plus the path watch, appended to an fsync'd record log, as soak/run.py
         does each second) for --sampler-seconds against a sysfs tree of --sampler-paths fabric
         controllers: CPU seconds (psutil) per hour of soak, as a fraction of one core.

Why these readers (measured on this machine, 8 hosts x 72 h of bw logs, CPU time of the same files,
load 3-15 from other agents): pandas.read_csv (C engine) 0.46-0.64 s; pyarrow's CSV reader 0.25-0.28 s;
polars with typed columns 0.20-0.26 s (untyped, polars reads fio's ' 1250061' as text). polars and
pyarrow are within noise of each other, both about half of pandas C; fxprobe reads bw/IOPS logs with
polars because it was the lower of the two in most rounds and streams a file in typed batches
(``scan_csv(...).collect_batches()``) that are checked as they are parsed, one host per core.
pandas' own engine="pyarrow" came out no faster than its C engine (it pays for building the DataFrame).
For histogram logs (1,859 fields a line) every columnar reader pays per column: numpy's C ``loadtxt``
read them 2.5x faster than pandas C and 3x faster than pyarrow, so fxprobe parses those in 16 MiB
text blocks with it. The bw case prints each reader beside fxprobe (a reader not installed is
skipped); ``scripts/bench logs`` shows the figures of the machine it runs on.

    scripts/bench logs [--hours 72] [--hosts 8] [--fleet-hosts 64] [--hist-hosts 8] [--hist-msec 10000]
                       [--rounds 3] [--cases bw,fleet,hist,sampler] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
START_MS = 1_764_000_000_000
GIB_MIB = 1024
TIME_GOAL = 1.2            # fxprobe <= 1.2 x bare pandas.read_csv (C engine)
RSS_GOAL_MIB = GIB_MIB     # peak RSS <= 1 GiB per case
FIO2GNUPLOT_GOAL = 10.0    # fxprobe >= 10 x faster than fio2gnuplot -b
SAMPLER_GOAL_PCT = 1.0     # the 1 Hz sampler <= 1 % of one core
BW_READERS = ("pandas-c", "pandas-pyarrow", "pyarrow-csv", "polars")


# -- generated logs ---------------------------------------------------------------------------
def generate_bw(folder: Path, hours: float, hosts: int) -> list[Path]:
    import numpy as np
    seconds = int(hours * 3600)
    rng = np.random.default_rng(7)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for host in range(hosts):
        t = START_MS + np.arange(seconds, dtype=np.int64) * 1000 + host
        bw = rng.normal(1_250_000, 50_000, seconds).clip(0).astype(np.int64)   # KiB/s, ~10 Gb/s per host
        bw[rng.integers(0, seconds, 20)] = 0                                    # a few stalled seconds
        path = folder / f"host{host + 1}_bw.1.log"
        path.write_text("\n".join(f"{a}, {b}, 0, 1048576, 0" for a, b in zip(t.tolist(), bw.tolist())) + "\n")
        paths.append(path)
    return paths


def generate_hist(folder: Path, hours: float, hosts: int, window_ms: int) -> list[Path]:
    """Hist logs as fio 3.33 writes them (time, ddir, bs, 1,856 bins); reads around 80-110 us, 20,000
    I/Os per second, each host a little slower than the one before, 1 window in 500 with a tail."""
    import numpy as np
    sys.path.insert(0, str(ROOT))
    from fxprobe.tools import fio
    rows = int(hours * 3600 * 1000 // window_ms)
    rng = np.random.default_rng(11)
    values = np.array([fio.bin_value_ns(i) for i in range(fio.PLAT_NR)], dtype=np.float64)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for host in range(hosts):
        median = 80_000 * (1 + host / 20)
        density = np.exp(-((np.log(np.maximum(values, 1)) - np.log(median)) ** 2) / (2 * 0.35**2))
        density /= density.sum()
        tail = np.exp(-((np.log(np.maximum(values, 1)) - np.log(20 * median)) ** 2) / (2 * 0.5**2))
        tail /= tail.sum()
        lo = int(np.flatnonzero(density + tail > 1e-12)[0])
        hi = int(np.flatnonzero(density + tail > 1e-12)[-1]) + 1
        ios = 20_000 * window_ms / 1000
        counts = rng.poisson(density[lo:hi] * ios, (rows, hi - lo))
        slow = rng.random(rows) < 1 / 500
        counts[slow] += rng.poisson(tail[lo:hi] * ios * 0.05, (int(slow.sum()), hi - lo))
        before, after = "0, " * lo, ", 0" * (fio.PLAT_NR - hi)
        path = folder / f"host{host + 1}_clat_hist.1.log"
        with open(path, "w") as handle:
            for r in range(rows):
                handle.write(f"{START_MS + (r + 1) * window_ms + host}, 0, 4096, {before}"
                             f"{', '.join(map(str, counts[r].tolist()))}{after}\n")
        paths.append(path)
    return paths


def fake_sysfs(root: Path, controllers: int) -> Path:
    """/sys/class/nvme with ``controllers`` live NVMe/TCP paths of one subsystem, and an empty /proc/mdstat."""
    nqn = "nqn.2014-08.org.nvmexpress:fxlab"
    subsys = root / "sys/class/nvme-subsystem/nvme-subsys0"
    subsys.mkdir(parents=True)
    for i in range(controllers):
        base = root / f"sys/class/nvme/nvme{i}"
        (base / f"nvme0c{i}n1").mkdir(parents=True)
        files = {"model": "Linux", "serial": "fxlab0001", "firmware_rev": "6.1.0", "transport": "tcp",
                 "address": f"traddr=192.0.2.{i % 2 + 1},trsvcid=4420,src_addr=192.0.2.{100 + i}", "state": "live",
                 "subsysnqn": nqn, "cntlid": str(i + 1), "kato": "5", "ctrl_loss_tmo": "600",
                 "reconnect_delay": "10", "fast_io_fail_tmo": "off", f"nvme0c{i}n1/ana_state": "optimized",
                 f"nvme0c{i}n1/nsid": "1"}
        for name, text in files.items():
            (base / name).write_text(text + "\n")
        (subsys / f"nvme{i}").mkdir()
    (root / "proc").mkdir()
    (root / "proc/mdstat").write_text("Personalities : \nunused devices: <none>\n")
    return root


# -- what each child measures -------------------------------------------------------------------
def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_s(who=resource.RUSAGE_SELF) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def child(mode: str, paths: list[str]) -> dict:
    sys.path.insert(0, str(ROOT))
    import pandas as pd
    from fxprobe.tools import fio_logs
    try:
        import polars as pl
    except ImportError:
        pl = None
    try:
        import pyarrow.csv as pcsv
    except ImportError:
        pcsv = None
    imports = _rss_mib()
    out: dict = {}
    began, cpu = time.perf_counter(), _cpu_s()
    if mode == "pandas-c":                 # the reference: every frame held, as an analysis would
        frames = [pd.read_csv(p, header=None, engine="c") for p in paths]
        out["rows"] = sum(len(f) for f in frames)
    elif mode in ("pandas-pyarrow", "pyarrow-csv") and pcsv is None:
        return {"mode": mode, "skipped": "pyarrow is not installed (pip install pyarrow)"}
    elif mode == "pandas-pyarrow":
        frames = [pd.read_csv(p, header=None, engine="pyarrow") for p in paths]
        out["rows"] = sum(len(f) for f in frames)
    elif mode == "pyarrow-csv":
        tables = [pcsv.read_csv(p, read_options=pcsv.ReadOptions(autogenerate_column_names=True)) for p in paths]
        out["rows"] = sum(t.num_rows for t in tables)
    elif mode == "polars":
        if pl is None:
            return {"mode": mode, "skipped": "polars is not installed (pip install polars)"}
        names = [f"f{i}" for i in range(5)]          # typed: untyped, polars reads ' 1250061' as text
        frames = [pl.read_csv(p, has_header=False, new_columns=names,
                              schema_overrides={n: pl.Float64 if n == "f1" else pl.Int64 for n in names})
                  for p in paths]
        out["rows"] = sum(f.height for f in frames)
    elif mode == "fxprobe":
        series = fio_logs.fleet_series(paths, 1000)
        out.update(rows=series.lines, windows=len(series.values), mean_bytes_s=float(series.values.mean()),
                   zero_seconds=sum(h.zero_windows for h in series.hosts))
    elif mode == "hist-pandas-c":          # each file read in turn (all at once would be 385 MiB a host)
        rows = 0
        for p in paths:
            frame = pd.read_csv(p, header=None, engine="c")
            rows += len(frame)
            del frame
        out["rows"] = rows
    elif mode == "hist-fxprobe":
        merged = fio_logs.merge_hist_logs(paths)
        out.update(rows=merged.windows, samples=merged.samples(), p50_ns=merged.percentile(50),
                   p99_ns=merged.percentile(99), p99_9_ns=merged.percentile(99.9))
    elif mode == "fio2gnuplot":
        folder, outdir = paths
        done = subprocess.run(["fio2gnuplot", "-b", "-d", outdir], cwd=folder, capture_output=True, text=True)
        if done.returncode != 0:
            return {"mode": mode, "skipped": f"fio2gnuplot exit {done.returncode}: {done.stdout[-200:]}"}
        out["rows"] = None
        shutil.rmtree(outdir, ignore_errors=True)
        imports = 0.0
        seconds = time.perf_counter() - began
        return {"mode": mode, "seconds": seconds, "cpu_s": _cpu_s(resource.RUSAGE_CHILDREN), **out,
                "imports_rss_mib": imports, "peak_rss_mib": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
    elif mode == "sampler":
        return sampler(float(paths[0]), Path(paths[1]))
    else:
        raise SystemExit(f"unknown mode {mode}")
    return {"mode": mode, "seconds": time.perf_counter() - began, "cpu_s": _cpu_s() - cpu, **out,
            "imports_rss_mib": imports, "peak_rss_mib": _rss_mib()}


def sampler(seconds: float, records: Path) -> dict:
    """The soak's per-second side work at 1 Hz for ``seconds``; CPU time of this process by psutil."""
    import psutil
    from fxprobe.host import telemetry
    from fxprobe.soak.common import stamp
    from fxprobe.soak.monitor import Monitor
    from fxprobe.soak.records import RecordLog
    log = RecordLog(records)
    monitor = Monitor(stall_s=5.0)
    baseline = {k: v for k, v in telemetry.path_states().items() if v["state"] == "live"}
    me = psutil.Process()
    cpu0, wall0 = sum(me.cpu_times()[:2]), time.perf_counter()
    samples, next_at = 0, time.time()
    while time.perf_counter() - wall0 < seconds:
        now = time.time()
        for record in monitor.paths(baseline, telemetry.path_states(), now):
            log.append(record)
        log.append({"type": "telemetry", "t": stamp(now), "ts": now, "host": telemetry.host_counters(),
                    "nvme_temp_c": telemetry.nvme_temperatures(), "paths": telemetry.path_states(),
                    "md": telemetry.md_states()})
        samples += 1
        next_at += 1.0
        time.sleep(max(0.0, next_at - time.time()))
    wall = time.perf_counter() - wall0
    cpu = sum(me.cpu_times()[:2]) - cpu0
    log.close()
    return {"mode": "sampler", "samples": samples, "wall_s": wall, "cpu_s": cpu, "paths": len(baseline),
            "cpu_s_per_hour": cpu / wall * 3600, "core_pct": cpu / wall * 100,
            "record_bytes_per_sample": records.stat().st_size / max(samples, 1)}


def measure(mode: str, args: list[str], env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", mode, *map(str, args)],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"bench logs: child {mode} failed (exit {done.returncode}): {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


def rounds(modes: dict[str, list], count: int) -> dict[str, dict]:
    """Each mode ``count`` times, interleaved; the median time and the largest peak RSS."""
    runs: dict[str, list] = {m: [] for m in modes}
    for _ in range(count):
        for mode, argv in modes.items():
            runs[mode].append(measure(mode.split("@")[0], argv))
    out = {}
    for mode, items in runs.items():
        if "skipped" in items[0]:
            out[mode] = {"skipped": items[0]["skipped"]}
            continue
        out[mode] = {"median_s": statistics.median(r["seconds"] for r in items),
                     "times_s": [round(r["seconds"], 3) for r in items],
                     "median_cpu_s": statistics.median(r["cpu_s"] for r in items),
                     "peak_rss_mib": max(r["peak_rss_mib"] for r in items),
                     "imports_rss_mib": max(r["imports_rss_mib"] for r in items),
                     **{k: v for k, v in items[0].items() if k not in ("mode", "seconds", "peak_rss_mib",
                                                                       "imports_rss_mib", "cpu_s")}}
    return out


# -- the cases --------------------------------------------------------------------------------------
def case_bw(folder: Path, paths: list[Path], count: int) -> dict:
    modes = {m: paths for m in BW_READERS}
    modes["fxprobe"] = paths
    modes["fio2gnuplot"] = [folder, folder.parent / "fio2gnuplot-out"]
    if shutil.which("fio2gnuplot") is None:
        modes.pop("fio2gnuplot")
    result = {"modes": rounds(modes, count)}
    ref, fx = result["modes"]["pandas-c"], result["modes"]["fxprobe"]
    result["ratios_vs_pandas_c"] = {m: r["median_s"] / ref["median_s"] for m, r in result["modes"].items()
                                    if "median_s" in r}
    result["cpu_ratios_vs_pandas_c"] = {m: r["median_cpu_s"] / ref["median_cpu_s"]
                                        for m, r in result["modes"].items() if "median_s" in r}
    result["time_ratio"] = fx["median_s"] / ref["median_s"]
    result["cpu_ratio"] = fx["median_cpu_s"] / ref["median_cpu_s"]
    gnu = result["modes"].get("fio2gnuplot")
    result["fio2gnuplot_speedup"] = gnu["median_s"] / fx["median_s"] if gnu and "median_s" in gnu else None
    if "fio2gnuplot" not in modes:
        result["modes"]["fio2gnuplot"] = {"skipped": "fio2gnuplot not found (Debian: apt-get install fio)"}
    return result


def case_fleet(paths: list[Path], count: int) -> dict:
    result = {"modes": rounds({"fxprobe": paths, "pandas-c": paths}, count)}
    result["time_ratio"] = result["modes"]["fxprobe"]["median_s"] / result["modes"]["pandas-c"]["median_s"]
    return result


def case_hist(paths: list[Path], count: int) -> dict:
    result = {"modes": rounds({"hist-fxprobe": paths, "hist-pandas-c": paths}, count)}
    result["time_ratio"] = (result["modes"]["hist-fxprobe"]["median_s"]
                            / result["modes"]["hist-pandas-c"]["median_s"])
    return result


def case_sampler(folder: Path, seconds: float, controllers: int) -> dict:
    tree = fake_sysfs(folder / "sysroot", controllers)
    env = {**os.environ, "FXPROBE_SYSROOT": str(tree)}
    return measure("sampler", [seconds, folder / "soak.jsonl"], env=env)


def _mib(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def _verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def print_text(result: dict, args) -> None:
    print(f"load before: {result['load_before']}; after: {result.get('load_after', '-')}")
    imports = None
    if "bw" in result:
        bw = result["bw"]
        print(f"bw: {args.hosts} hosts x {args.hours:g} h of 1 s bandwidth logs, {bw['lines']:,} lines, "
              f"{bw['files_mib']:,.0f} MiB (median of {args.rounds}, times in s)")
        for mode, r in bw["modes"].items():
            if "skipped" in r:
                print(f"  {mode:15} skipped: {r['skipped']}")
                continue
            imports = r["imports_rss_mib"] or imports
            print(f"  {mode:15} {r['median_s']:7.2f} s (x{bw['ratios_vs_pandas_c'][mode]:5.2f} of pandas C)  "
                  f"CPU {r['median_cpu_s']:6.2f} s (x{bw['cpu_ratios_vs_pandas_c'][mode]:5.2f})  "
                  f"peak RSS {r['peak_rss_mib']:6,.0f} MiB  rounds {', '.join(map(str, r['times_s']))} s")
        print(f"  fxprobe / pandas.read_csv (C engine): time {bw['time_ratio']:.2f}x "
              f"(goal <= {TIME_GOAL}x): {_verdict(bw['time_ratio'] <= TIME_GOAL)}; CPU time {bw['cpu_ratio']:.2f}x")
        if bw["fio2gnuplot_speedup"] is not None:
            print(f"  fxprobe vs fio2gnuplot -b: {bw['fio2gnuplot_speedup']:.1f}x faster "
                  f"(goal >= {FIO2GNUPLOT_GOAL:g}x): {_verdict(bw['fio2gnuplot_speedup'] >= FIO2GNUPLOT_GOAL)}")
    if "fleet" in result:
        fl = result["fleet"]
        fx, ref = fl["modes"]["fxprobe"], fl["modes"]["pandas-c"]
        print(f"fleet: {args.fleet_hosts} hosts x {args.hours:g} h of bandwidth logs, {fx['rows']:,} lines, "
              f"{fl['files_mib']:,.0f} MiB")
        print(f"  fxprobe   {fx['median_s']:7.2f} s  peak RSS {fx['peak_rss_mib']:6,.0f} MiB "
              f"(goal <= {RSS_GOAL_MIB} MiB): {_verdict(fx['peak_rss_mib'] <= RSS_GOAL_MIB)}")
        print(f"  pandas-c  {ref['median_s']:7.2f} s  peak RSS {ref['peak_rss_mib']:6,.0f} MiB (every frame held); "
              f"time ratio fxprobe / pandas-c {fl['time_ratio']:.2f}x")
    if "hist" in result:
        hi = result["hist"]
        fx, ref = hi["modes"]["hist-fxprobe"], hi["modes"]["hist-pandas-c"]
        print(f"hist: {args.hist_hosts} hosts x {args.hours:g} h of clat_hist logs ({args.hist_msec} ms windows, "
              f"1,856 bins), {fx['rows']:,} lines, {hi['files_mib']:,.0f} MiB")
        print(f"  fxprobe   {fx['median_s']:7.2f} s  peak RSS {fx['peak_rss_mib']:6,.0f} MiB "
              f"(goal <= {RSS_GOAL_MIB} MiB): {_verdict(fx['peak_rss_mib'] <= RSS_GOAL_MIB)}; "
              f"{fx['samples']:,} samples, merged p50 {fx['p50_ns'] / 1000:.1f} us, p99 {fx['p99_ns'] / 1000:.1f} us, "
              f"p99.9 {fx['p99_9_ns'] / 1000:.1f} us")
        print(f"  pandas-c  {ref['median_s']:7.2f} s  peak RSS {ref['peak_rss_mib']:6,.0f} MiB (one file at a time); "
              f"time ratio fxprobe / pandas-c {hi['time_ratio']:.2f}x")
    if imports:
        print(f"imports alone (python, numpy, pandas, polars, fxprobe): about {imports:,.0f} MiB of each peak RSS")
    if "sampler" in result:
        s = result["sampler"]
        print(f"soak sampler at 1 Hz ({s['samples']} samples in {s['wall_s']:.0f} s, {s['paths']} NVMe paths): "
              f"{s['cpu_s_per_hour']:.1f} CPU s per hour of soak = {s['core_pct']:.3f} % of one core "
              f"(goal <= {SAMPLER_GOAL_PCT:g} %): {_verdict(s['core_pct'] <= SAMPLER_GOAL_PCT)}; "
              f"{s['record_bytes_per_sample']:,.0f} bytes of records per sample")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        print(json.dumps(child(argv[1], argv[2:])))
        return 0
    parser = argparse.ArgumentParser(prog="scripts/bench logs", description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=72)
    parser.add_argument("--hosts", type=int, default=8, help="hosts of the bw case (default 8)")
    parser.add_argument("--fleet-hosts", type=int, default=64, help="hosts of the fleet case (default 64)")
    parser.add_argument("--hist-hosts", type=int, default=8, help="hosts of the hist case (default 8)")
    parser.add_argument("--hist-msec", type=int, default=10_000, help="log_hist_msec of the hist logs (default 10000)")
    parser.add_argument("--sampler-seconds", type=float, default=30)
    parser.add_argument("--sampler-paths", type=int, default=8, help="NVMe paths the sampler watches (default 8)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default="bw,fleet,hist,sampler")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = set(cases) - {"bw", "fleet", "hist", "sampler"}
    if unknown or args.rounds < 1 or min(args.hosts, args.fleet_hosts, args.hist_hosts, args.hist_msec) < 1:
        parser.error(f"unknown case(s) {', '.join(sorted(unknown))}" if unknown else "counts must be >= 1")
    result: dict = {"hours": args.hours, "rounds": args.rounds, "load_before": _load()}
    with tempfile.TemporaryDirectory(prefix="fxprobe-bench-logs-") as tmp:
        folder = Path(tmp)
        if "bw" in cases or "fleet" in cases:
            many = generate_bw(folder / "fleet", args.hours, max(args.hosts if "bw" in cases else 0,
                                                                 args.fleet_hosts if "fleet" in cases else 0))
        if "bw" in cases:
            (folder / "bw").mkdir()
            paths = []
            for p in many[:args.hosts]:
                os.link(p, folder / "bw" / p.name)
                paths.append(folder / "bw" / p.name)
            result["bw"] = {"hosts": args.hosts, "files_mib": _mib(paths), **case_bw(folder / "bw", paths, args.rounds)}
            result["bw"]["lines"] = result["bw"]["modes"]["fxprobe"]["rows"]
        if "fleet" in cases:
            paths = many[:args.fleet_hosts]
            result["fleet"] = {"hosts": args.fleet_hosts, "files_mib": _mib(paths), **case_fleet(paths, args.rounds)}
        if "hist" in cases:
            paths = generate_hist(folder / "hist", args.hours, args.hist_hosts, args.hist_msec)
            result["hist"] = {"hosts": args.hist_hosts, "window_ms": args.hist_msec, "files_mib": _mib(paths),
                              **case_hist(paths, args.rounds)}
        if "sampler" in cases:
            result["sampler"] = case_sampler(folder, args.sampler_seconds, args.sampler_paths)
    result["load_after"] = _load()
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print_text(result, args)
    return 0


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f}, {five:.2f}, {fifteen:.2f} on {os.cpu_count()} cores"


if __name__ == "__main__":
    sys.exit(main())
