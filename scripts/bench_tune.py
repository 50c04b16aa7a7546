"""scripts/bench tune: the long `fault tune` sweep, then the shipped link-down-tuned scenario N times.

    scripts/bench tune --lab NAME [--repeat 3] [--runs DIR] [--scenario link-down] [--tuned-runs 3]

Runs `fxprobe fault tune SCENARIO --lab NAME --repeat N` (tcp and rdma, the three built-in settings: about
18 fault runs, ~30 min under TCG), prints its table and best setting, then `fxprobe fault run
link-down-tuned` --tuned-runs times and prints each verdict and longest stall. Evidence stays in --runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path


def fxprobe(runs: str, *args: str) -> tuple[int, dict | None, str]:
    done = subprocess.run([sys.executable, "-m", "fxprobe.cli.main", "--runs", runs, "--json", *args],
                          capture_output=True, text=True)
    out = done.stdout.strip()
    return done.returncode, json.loads(out) if out.startswith("{") else None, done.stderr


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench tune", description=__doc__.splitlines()[0])
    parser.add_argument("--lab", default="default")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--runs", default="runs")
    parser.add_argument("--scenario", default="link-down")
    parser.add_argument("--tuned-runs", type=int, default=3)
    parser.add_argument("--transport", action="append", default=[])
    args = parser.parse_args(argv)
    extra = [a for t in args.transport for a in ("--transport", t)]
    code, data, err = fxprobe(args.runs, "fault", "tune", args.scenario, "--lab", args.lab, "--repeat",
                              str(args.repeat), *extra)
    if data is None:
        print(f"bench tune: fault tune failed (exit {code}): {err.strip()[-500:]}", file=sys.stderr)
        return code or 4
    from fxprobe.faults.tune import lines
    print(f"fault tune {args.scenario} in lab {args.lab}, {args.repeat} repeat(s): {data['run_dir']}")
    for line in lines(data["tune"]):
        print(f"  {line}")
    print(f"{args.tuned_runs} x link-down-tuned:")
    for n in range(1, args.tuned_runs + 1):
        code, run, err = fxprobe(args.runs, "fault", "run", "link-down-tuned", "--lab", args.lab)
        if run is None or "impact" not in run:
            print(f"  run {n}: error (exit {code}): {err.strip()[-300:]}")
            continue
        print(f"  run {n}: {run['verdict'].upper()}, longest stall {run['impact']['longest_stall_s']} s, "
              f"errors {run['impact']['errors']}, throughput {run['impact']['throughput_pct']} % ({run['run_dir']})")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
