"""scripts/bench verdicts in the session lab, as short as it gets: one planted twin (the raid0 pull, its timings
shortened), one round - the matrix has its shape: the expected verdict and why, 1/1 correct, every criterion's
spread against its threshold. The measurement itself (every scenario and twin x 5) is run by hand, alone."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from labcli import fault_env, scenario_file

pytestmark = pytest.mark.lab

BENCH = Path(__file__).resolve().parent.parent / "scripts" / "bench"


def test_bench_verdicts_prints_the_matrix_of_one_scenario(lab, tmp_path):
    scenario = scenario_file(tmp_path, "drive-pull-raid0", timing={"steady_s": 5, "settle_s": 1, "fault_s": 3,
                                                                   "recover_s": 3}, load={"region": "2M"})
    done = subprocess.run([sys.executable, str(BENCH), "verdicts", "--lab", lab.name, "--repeat", "1", "--scenario",
                           str(scenario), "--runs", str(tmp_path / "runs")], capture_output=True, text=True,
                          timeout=900, env=fault_env(tmp_path))
    lab.reload()
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    out = done.stdout
    assert "round 1/1 drive-pull-raid0: VISIBLE (expected visible)" in out, out
    assert "drive-pull-raid0: expected VISIBLE, 1/1 correct (1 visible)" in out, out
    assert "  why: raid0 has no redundancy" in out
    summary = json.loads((tmp_path / "runs" / "bench-verdicts.json").read_text())
    (row,) = summary["matrix"]
    assert summary["all_correct"] and (row["correct"], row["total"]) == (1, 1)
    names = [c["name"] for c in row["criteria"]]
    assert names[:2] == ["I/O errors", "longest stall (no completed I/O)"] and "data verified (mismatches)" in names
    errors = row["criteria"][0]
    assert errors["comparator"] == "<=" and errors["threshold"] == 0 and errors["min"] > 0      # errors counted
    assert all({"min", "median", "max", "worst_margin"} <= set(c) for c in row["criteria"] if c["n"])
    assert f"  I/O errors: min/median/max {errors['min']} / " in out
    (run,) = summary["runs"]
    assert run["correct"] and Path(run["run_dir"]).is_dir() and run["load_before"] >= 0
    assert "twin" not in [e.name for e in lab.state.exports]
