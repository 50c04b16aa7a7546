"""scripts/bench verdicts without a lab: which scenarios it runs (each with its twin), and the matrix it prints
from the runs' recorded criteria (correct/total, min/median/max against the threshold, the worst margin)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))

import bench_verdicts  # noqa: E402
from fxprobe.faults.scenario import load_scenario, scenario_names  # noqa: E402


def test_every_shipped_scenario_says_what_the_lab_gives_and_why_and_names_a_twin_that_is_visible():
    names = scenario_names()
    twins = set()
    for name in names:
        scenario = load_scenario(name)
        assert scenario.lab["expect"] in ("invisible", "visible") and scenario.lab["expect_reason"], name
        if scenario.lab["twin"]:
            twin = load_scenario(scenario.lab["twin"])
            assert twin.lab["expect"] == "visible", (name, twin.name)
            twins.add(twin.name)
    non_twins = [n for n in names if n not in twins]
    assert all(load_scenario(n).lab["twin"] for n in non_twins), non_twins     # every scenario has its twin
    chosen = [s.name for s in bench_verdicts.scenarios([], True)]
    assert sorted(chosen) == names and len(chosen) == len(set(chosen))        # a shared twin runs once
    assert chosen[chosen.index("drive-pull") + 1] == "drive-pull-raid0"


def _run(name, expect, verdict, stall, pct, code=None):
    criteria = [{"name": "longest stall (no completed I/O)", "outcome": "pass" if stall <= 2 else "fail",
                 "measured": stall, "threshold": 2.0, "comparator": "<=", "unit": "s", "margin": 2.0 - stall},
                {"name": "throughput in fault window vs pre-fault", "outcome": "pass" if pct >= 50 else "fail",
                 "measured": pct, "threshold": 50.0, "comparator": ">=", "unit": "%", "margin": pct - 50.0}]
    code = code if code is not None else (0 if verdict == "invisible" else 1)
    return {"scenario": name, "expect": expect, "verdict": verdict, "exit_code": code,
            "correct": verdict == expect and code == (0 if expect == "invisible" else 1), "criteria": criteria,
            "rebuild": None, "seconds": 60.0, "load_before": 1.0, "run_dir": "x", "error": ""}


def test_the_matrix_counts_correct_verdicts_and_shows_each_criterion_s_spread_against_its_threshold():
    chosen = [load_scenario("drive-pull")]
    runs = [_run("drive-pull", "invisible", "invisible", s, p) for s, p in ((0.2, 70.0), (0.4, 62.5), (0.3, 81.0))]
    runs.append(_run("drive-pull", "invisible", "visible", 0.3, 45.5))
    (row,) = bench_verdicts.matrix(chosen, runs)
    assert (row["correct"], row["total"], row["verdicts"]) == (3, 4, {"invisible": 3, "visible": 1})
    stall, pct = row["criteria"]
    assert (stall["min"], stall["median"], stall["max"]) == (0.2, 0.3, 0.4) and abs(stall["worst_margin"] - 1.6) < 1e-9
    assert (pct["min"], pct["max"], pct["worst_margin"], pct["outcomes"]) == (45.5, 81.0, -4.5, {"fail": 1, "pass": 3})
    assert row["failed_by"] == {"throughput in fault window vs pre-fault": 1}
    text = bench_verdicts.lines([row])
    assert text[0].startswith("drive-pull: expected INVISIBLE, 3/4 correct (3 invisible, 1 visible); twin: ")
    assert text[2] == "  failed criteria: throughput in fault window vs pre-fault in 1/4"
    assert "throughput in fault window vs pre-fault: min/median/max 45.5 / 66.25 / 81 % (need >= 50.0 %, worst " \
           "margin -4.5 %; 1 fail, 3 pass)" in text[4], text
