"""fault tune in the session lab (issue 18 item 1), one short trial: the table row, its own trial run folder,
and the paths restored as connected. The full sweep (tcp and rdma, 3 settings, 3 repeats) is
`scripts/bench tune`. FXPROBE_TEST_LAB=<name> runs it in a lab that is already up."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from fxprobe.faults.scenario import SCENARIO_DIR
from labcli import PARALLEL_LOAD

pytestmark = pytest.mark.lab


@pytest.mark.lab_parallel   # judges no time: one trial gives a row and restores the paths, whatever it measured
def test_one_trial_gives_a_row_a_trial_folder_and_restores_the_paths(lab, tmp_path):
    data = tomllib.loads((SCENARIO_DIR / "link-down.toml").read_text())
    data["timing"].update({"steady_s": 4, "settle_s": 1, "fault_s": 12, "recover_s": 3})
    data["load"].update(PARALLEL_LOAD)
    lines = [f"{k} = {json.dumps(v)}" for k, v in data.items() if not isinstance(v, dict)]
    for section, table in data.items():
        if isinstance(table, dict):
            lines += [f"[{section}]"] + [f"{k} = {json.dumps(v)}" for k, v in table.items()]
    scenario = tmp_path / "link-down.toml"
    scenario.write_text("\n".join(lines) + "\n")
    argv = [sys.executable, "-m", "fxprobe.cli.main", "--runs", str(tmp_path / "runs"), "--json", "fault", "tune",
            str(scenario), "--lab", lab.name, "--transport", "tcp", "--setting",
            "kato=2,reconnect_delay=1,ctrl_loss_tmo=60,fast_io_fail_tmo=5", "--repeat", "1"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "FXPROBE_FAULT_JOURNAL": str(tmp_path / "fault-journal.json")})
    assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr[-2000:]
    result = json.loads(done.stdout)
    [row] = result["tune"]["rows"]
    assert row["transport"] == "tcp" and row["setting"]["keep_alive_tmo"] == 2 and row["trials"] == 1
    assert row["failed_runs"] == 0 and row["stall_max_s"] is not None
    assert result["tune"]["best"]["label"] == row["label"]
    [trial] = result["trials"]
    trial_results = json.loads((Path(trial["run_dir"]) / "results.json").read_text())
    assert trial_results["command"] == "fault run" and trial_results["verdict"] == trial["verdict"]
    assert (done.returncode == 0) == result["tune"]["meets_criteria"]
    lab.reload()
    live = lab.wait_paths("host1", lab.spec.subsystem_nqn, len(lab.links("host1")), timeout=120)
    assert all(p.transport == "tcp" for p in live)
