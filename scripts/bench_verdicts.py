"""scripts/bench verdicts: are the fault verdicts repeatable? Every shipped scenario (faults/*.toml with a
``lab.expect``) and its planted-fail twin (``lab.twin``), N times each in one lab, then a matrix: the verdict
the lab is expected to give and why (the scenario's ``lab.expect_reason``), correct/total, and for every
criterion the spread (min / median / max) of its measured value against its threshold, with the worst margin.

    scripts/bench verdicts --lab NAME [--repeat 5] [--runs DIR] [--scenario NAME|PATH ...] [--no-twins] [--json]

Rounds go scenario after scenario (round 1 of every scenario, then round 2 ...), so a slow spell of the
machine touches every scenario alike; each run is `fxprobe fault run NAME --lab NAME` in a process of its own
(`--allow-visible` where the expected verdict is visible: the planted twins are refused without it). Each run's
folder stays under --runs; the matrix and every run's figures are written to --runs/bench-verdicts.json.
Exit 0 when every scenario gave its expected verdict every time, 1 otherwise. A measurement for a closing
note runs alone on the machine (`lab-slot --solo`): the load average at each run's start is recorded.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def scenarios(chosen: list[str], twins: bool) -> list:
    """The scenarios to run, each followed by its twin (a twin named by several scenarios runs once)."""
    from fxprobe.faults.scenario import load_scenario, scenario_names
    names = chosen or [n for n in scenario_names() if load_scenario(n).lab["expect"]]
    out, seen = [], set()
    for name in names:
        scenario = load_scenario(name)
        for one in [scenario] + ([load_scenario(scenario.lab["twin"])] if twins and scenario.lab["twin"] else []):
            if one.source not in seen:
                seen.add(one.source)
                out.append(one)
    return out


def run_once(scenario, lab: str, runs: Path) -> dict:
    """One `fxprobe fault run` in its own process: its verdict, criteria, rebuild, wall time and the load."""
    expect = scenario.lab["expect"]
    argv = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(runs), "--json", "-q", "fault", "run",
            scenario.source, "--lab", lab] + (["--allow-visible"] if expect == "visible" else [])
    load = os.getloadavg()[0]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=scenario.planned_s + 1200)
        code, out, err = done.returncode, done.stdout.strip(), done.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = None, "", f"timed out after {exc.timeout:.0f} s"
    data = json.loads(out) if out.startswith("{") else {}
    verdict = data.get("verdict") if isinstance(data.get("verdict"), str) else "error"
    tail = (err.strip().splitlines() or ["?"])[-1]
    return {"scenario": scenario.name, "expect": expect, "verdict": verdict, "exit_code": code,
            "correct": verdict == expect and code == (0 if expect == "invisible" else 1),
            "criteria": data.get("criteria") or [], "rebuild": data.get("rebuild"),
            "seconds": round(time.monotonic() - started, 1), "load_before": round(load, 2),
            "run_dir": data.get("run_dir"), "error": "" if verdict != "error" else (data.get("reason") or tail)}


def spread(values: list[float]) -> dict:
    return {"min": min(values), "median": statistics.median(values), "max": max(values)} if values else {}


def criterion_rows(runs: list[dict]) -> list[dict]:
    """Per criterion (in the order first seen): threshold, outcomes and the spread of the measured values."""
    rows: dict[str, dict] = {}
    for run in runs:
        for c in run["criteria"]:
            row = rows.setdefault(c["name"], {"name": c["name"], "comparator": c.get("comparator", ""),
                                              "threshold": c.get("threshold"), "unit": c.get("unit", ""),
                                              "measured": [], "margins": [], "outcomes": {}})
            row["outcomes"][c.get("outcome", "?")] = row["outcomes"].get(c.get("outcome", "?"), 0) + 1
            if isinstance(c.get("measured"), (int, float)) and not isinstance(c.get("measured"), bool):
                row["measured"].append(c["measured"])
            if isinstance(c.get("margin"), (int, float)):
                row["margins"].append(c["margin"])
    return [{**{k: v for k, v in row.items() if k not in ("measured", "margins")}, "n": len(row["measured"]),
             **spread(row["measured"]), "worst_margin": min(row["margins"]) if row["margins"] else None}
            for row in rows.values()]


def rebuild_row(runs: list[dict]) -> dict | None:
    """The md rebuild figures over the runs that observed one (information, not judged)."""
    seen = [r["rebuild"] for r in runs if isinstance(r.get("rebuild"), dict) and r["rebuild"].get("observed")]
    if not seen:
        return None
    band = lambda name, key: [b[key] for b in (s.get(name) for s in seen) if b and b.get(key) is not None]
    return {"observed": len(seen), "finished": sum(1 for s in seen if s.get("finished")),
            "bound_s": seen[0].get("bound_s"),
            "restore_to_clean_s": spread([s["restore_to_clean_s"] for s in seen if s.get("restore_to_clean_s")
                                          is not None]),
            "degraded_s": spread(band("degraded", "seconds")),
            "degraded_throughput_pct": spread(band("degraded", "throughput_pct")),
            "rebuilding_throughput_pct": spread(band("rebuilding", "throughput_pct")),
            "degraded_p99_ratio": spread(band("degraded", "p99_ratio")),
            "rebuilding_p99_ratio": spread(band("rebuilding", "p99_ratio"))}


def matrix(chosen: list, results: list[dict]) -> list[dict]:
    out = []
    for scenario in chosen:
        runs = [r for r in results if r["scenario"] == scenario.name]
        verdicts: dict[str, int] = {}
        failed_by: dict[str, int] = {}     # which criteria made the visible runs visible (the twin's reason?)
        for r in runs:
            verdicts[r["verdict"]] = verdicts.get(r["verdict"], 0) + 1
            for c in r["criteria"]:
                if c.get("outcome") == "fail":
                    failed_by[c["name"]] = failed_by.get(c["name"], 0) + 1
        out.append({"scenario": scenario.name, "expect": scenario.lab["expect"],
                    "reason": scenario.lab["expect_reason"], "twin": scenario.lab["twin"],
                    "correct": sum(1 for r in runs if r["correct"]), "total": len(runs), "verdicts": verdicts,
                    "failed_by": failed_by,
                    "errors": [r["error"] for r in runs if r["error"]], "criteria": criterion_rows(runs),
                    "rebuild": rebuild_row(runs), "seconds": spread([r["seconds"] for r in runs])})
    return out


def _num(value, unit: str = "") -> str:
    from fxprobe.core.verdict import format_number
    return format_number(value, unit) if value is not None else "-"


def lines(rows: list[dict]) -> list[str]:
    """The matrix as a person reads it."""
    out = []
    for row in rows:
        seen = ", ".join(f"{n} {v}" for v, n in sorted(row["verdicts"].items()))
        out.append(f"{row['scenario']}: expected {row['expect'].upper()}, {row['correct']}/{row['total']} correct "
                   f"({seen}){'; twin: ' + row['twin'] if row['twin'] else ''}")
        if row["reason"]:
            out.append(f"  why: {row['reason']}")
        if row["failed_by"]:
            out.append("  failed criteria: " + ", ".join(f"{name} in {n}/{row['total']}"
                                                        for name, n in row["failed_by"].items()))
        for c in row["criteria"]:
            need = f"need {c['comparator']} {_num(c['threshold'], c['unit'])}" if c["comparator"] else ""
            values = (f"{_num(c['min'])} / {_num(c['median'])} / {_num(c['max'])}{' ' + c['unit'] if c['unit'] else ''}"
                      if c["n"] else "-")
            margin = f", worst margin {_num(c['worst_margin'], c['unit'])}" if c["worst_margin"] is not None else ""
            outcomes = ", ".join(f"{n} {o}" for o, n in sorted(c["outcomes"].items()))
            out.append(f"  {c['name']}: min/median/max {values} ({need}{margin}; {outcomes})")
        out += _rebuild_lines(row["rebuild"])
        for error in row["errors"]:
            out.append(f"  error: {error}")
        if row["seconds"]:
            out.append(f"  wall time per run: {row['seconds']['min']:.0f} / {row['seconds']['median']:.0f} / "
                       f"{row['seconds']['max']:.0f} s")
    return out


def _rebuild_lines(rebuild: dict | None) -> list[str]:
    if not rebuild:
        return []
    s = lambda d, unit="": (f"{_num(d['min'], unit)} / {_num(d['median'], unit)} / {_num(d['max'], unit)}"
                            if d else "-")
    return [f"  md rebuild (information): {rebuild['finished']}/{rebuild['observed']} finished within "
            f"{_num(rebuild['bound_s'], 's')} of the restore; restore to clean {s(rebuild['restore_to_clean_s'], 's')}; "
            f"degraded {s(rebuild['degraded_s'], 's')} at {s(rebuild['degraded_throughput_pct'], '%')} of "
            f"pre-fault (p99 x {s(rebuild['degraded_p99_ratio'])}); rebuilding at "
            f"{s(rebuild['rebuilding_throughput_pct'], '%')} (p99 x {s(rebuild['rebuilding_p99_ratio'])})"]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="scripts/bench verdicts", description=__doc__.splitlines()[0])
    parser.add_argument("--lab", required=True)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--runs", default="runs/bench-verdicts")
    parser.add_argument("--scenario", action="append", default=[], help="name or path (default: every shipped "
                        "scenario with lab.expect)")
    parser.add_argument("--no-twins", action="store_true", help="leave out the twins of the chosen scenarios")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be >= 1")
    from fxprobe.core.errors import FxprobeError
    try:
        chosen = scenarios(args.scenario, not args.no_twins)
    except FxprobeError as exc:
        print(f"bench verdicts: {exc}", file=sys.stderr)
        return 2
    unexpected = [s.name for s in chosen if not s.lab["expect"]]
    if unexpected:
        print(f"bench verdicts: no lab.expect in {', '.join(unexpected)}: say which verdict the lab gives and why",
              file=sys.stderr)
        return 2
    runs = Path(args.runs)
    runs.mkdir(parents=True, exist_ok=True)
    results = []
    for round_ in range(1, args.repeat + 1):
        for scenario in chosen:
            result = run_once(scenario, args.lab, runs)
            results.append({**result, "round": round_})
            if not args.json:
                print(f"round {round_}/{args.repeat} {scenario.name}: {result['verdict'].upper()} (expected "
                      f"{result['expect']}) in {result['seconds']:.0f} s, load {result['load_before']:.1f}"
                      f"{' - ' + result['error'] if result['error'] else ''}", flush=True)
    rows = matrix(chosen, results)
    summary = {"lab": args.lab, "repeat": args.repeat, "matrix": rows, "runs": results,
               "all_correct": all(r["correct"] == r["total"] for r in rows)}
    (runs / "bench-verdicts.json").write_text(json.dumps(summary, indent=2) + "\n")
    if args.json:
        print(json.dumps(summary, indent=2))
    else:
        print(f"\nverdict matrix, lab {args.lab}, {args.repeat} run(s) each (evidence: {runs}):")
        for line in lines(rows):
            print(line)
    return 0 if summary["all_correct"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main(sys.argv[1:]))
