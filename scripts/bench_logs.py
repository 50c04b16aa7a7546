#!/usr/bin/env python3
"""Log analysis speed: 72 h x 8 hosts of 1 s fio bandwidth logs, fxprobe's analysis vs bare pandas.read_csv.

Generates the logs (epoch-ms stamps, 259,200 lines per host), then, each in a fresh process so
that peak memory is its own, times (median of --rounds) and measures peak RSS of
  reference: pandas.read_csv of every file (no analysis at all), and
  fxprobe:   fxprobe.tools.fio.parse_fio_log of every file (validation, types) + the aggregate
             bandwidth series across hosts (fxprobe.workload.run.bandwidth_series) + stall count.
Reports both and their ratios (fxprobe / reference).

    scripts/bench logs [--hours 72] [--hosts 8] [--rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def generate(folder: Path, hours: float, hosts: int) -> list[Path]:
    import numpy as np
    seconds = int(hours * 3600)
    start_ms = 1_764_000_000_000
    rng = np.random.default_rng(7)
    paths = []
    for host in range(hosts):
        t = start_ms + np.arange(seconds, dtype=np.int64) * 1000 + host
        bw = rng.normal(1_250_000, 50_000, seconds).clip(0).astype(np.int64)   # KiB/s, ~10 Gb/s per host
        bw[rng.integers(0, seconds, 20)] = 0                                    # a few stalled seconds
        path = folder / f"host{host + 1}_bw.1.log"
        text = "\n".join(f"{a}, {b}, 0, 1048576, 0" for a, b in zip(t.tolist(), bw.tolist()))
        path.write_text(text + "\n")
        paths.append(path)
    return paths


def child(mode: str, paths: list[str]) -> None:
    sys.path.insert(0, str(ROOT))
    import pandas as pd
    from fxprobe.tools import fio
    from fxprobe.workload.run import bandwidth_series
    began = time.perf_counter()
    if mode == "reference":
        frames = [pd.read_csv(p, header=None) for p in paths]
        rows = sum(len(f) for f in frames)
        extra = {}
    else:
        frames = [fio.parse_fio_log(Path(p)) for p in paths]
        series = bandwidth_series(frames, 1000)
        values = [v for _, v in series]
        rows = sum(len(f) for f in frames)
        extra = {"series_points": len(values), "mean_bytes_s": statistics.fmean(values) if values else 0,
                 "zero_seconds": int(sum((f["value"] == 0).sum() for f in frames))}
    seconds = time.perf_counter() - began
    print(json.dumps({"mode": mode, "seconds": seconds, "rows": rows,
                      "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, **extra}))


def measure(mode: str, paths: list[Path]) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", mode, *map(str, paths)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "--child":
        child(argv[1], argv[2:])
        return 0
    parser = argparse.ArgumentParser(prog="scripts/bench logs", description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=72)
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fxprobe-bench-logs-") as folder:
        made = time.perf_counter()
        paths = generate(Path(folder), args.hours, args.hosts)
        size = sum(p.stat().st_size for p in paths)
        made = time.perf_counter() - made
        runs = {"reference": [], "fxprobe": []}
        for _ in range(args.rounds):
            for mode in ("reference", "fxprobe"):     # interleaved, so drift hits both alike
                runs[mode].append(measure(mode, paths))
    result = {"hours": args.hours, "hosts": args.hosts, "files_mib": size / 2**20, "generate_s": made}
    for mode, items in runs.items():
        result[mode] = {"median_s": statistics.median(r["seconds"] for r in items),
                        "peak_rss_mib": max(r["peak_rss_mib"] for r in items), "rows": items[0]["rows"]}
    result["time_ratio"] = result["fxprobe"]["median_s"] / result["reference"]["median_s"]
    result["memory_ratio"] = result["fxprobe"]["peak_rss_mib"] / result["reference"]["peak_rss_mib"]
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{args.hosts} hosts x {args.hours:g} h of 1 s bw logs: {result['reference']['rows']:,} lines, "
              f"{size / 2**20:,.0f} MiB")
        for mode in ("reference", "fxprobe"):
            r = result[mode]
            print(f"  {mode:9}: {r['median_s']:.2f} s (median of {args.rounds}), peak RSS {r['peak_rss_mib']:,.0f} MiB")
        print(f"  ratio fxprobe / pandas.read_csv: time {result['time_ratio']:.2f}x, memory {result['memory_ratio']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
