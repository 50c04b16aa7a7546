"""What a node runs imports what it uses: a lab guest runs every import under emulation, where pandas and polars
took 10.5 s of a soak's start (cProfile in a guest: workload.run 10.9 s, pandas 6.8 s, polars 3.7 s, for a 5 s
soak), and psutil's children() read every process's stat file (1.5 s a call). The commands lab guests and
remote nodes run must start without the numeric libraries; the commands that analyse logs or draw load them."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from fxprobe.tools.procs import children

NUMERIC = ("pandas", "polars", "numpy", "matplotlib")

# the modules each command a node runs imports while it runs (its CLI module and the library it calls)
NODE_COMMANDS = {
    "soak": ["fxprobe.cli.soak", "fxprobe.soak.run", "fxprobe.workload.plan", "fxprobe.soak.summary",
             "fxprobe.soak.verify", "fxprobe.soak.stream", "fxprobe.host.telemetry",
             "fxprobe.gates.config"],      # the G4 stall limit it warns about at its start
    "selftest": ["fxprobe.cli.selftest", "fxprobe.host.selftest", "fxprobe.host.inventory"],
    "inventory": ["fxprobe.cli.inventory", "fxprobe.host.inventory"],
    "connect/discover": ["fxprobe.cli.fabrics", "fxprobe.host.fabrics"],
    "netcheck": ["fxprobe.cli.netcheck", "fxprobe.network.netcheck"],
    "preflight": ["fxprobe.cli.preflight", "fxprobe.host.preflight", "fxprobe.host.environment"],
    "run --dry-run": ["fxprobe.cli.run", "fxprobe.workload.plan"],
}


def loaded_after(modules: list[str]) -> list[str]:
    code = ("import importlib, sys\n"
            f"for name in {modules!r}: importlib.import_module(name)\n"
            f"print(' '.join(m for m in {NUMERIC!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


@pytest.mark.parametrize("command", sorted(NODE_COMMANDS))
def test_a_command_a_node_runs_loads_no_numeric_library(command):
    assert loaded_after(NODE_COMMANDS[command]) == [], f"{command} imports a numeric library at start"


def test_a_real_soak_from_start_to_verdict_imports_no_numeric_library(tmp_path):
    """The whole command, as a node runs it (fio on a directory, 2 s): Python's own import log names every module
    it loaded, including those a function imports when it runs."""
    (tmp_path / "data").mkdir()
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "fxprobe.cli.main", "--json", "--run-dir",
                           str(tmp_path / "run"), "soak", "small-file-dataset", "--duration", "2s", "--target",
                           str(tmp_path / "data"), "--size", "4M", "--sample", "1"],
                          capture_output=True, text=True, timeout=300)
    assert (tmp_path / "run" / "results.json").exists(), done.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "fxprobe.soak.run" in imported and "fxprobe.gates.config" in imported, sorted(imported)[:20]
    assert not [name for name in imported if name.split(".")[0] in NUMERIC]


def test_the_planted_twin_the_workload_runner_does_load_them():
    # the check can fail: running a profile analyses fio's logs (polars), so its module loads them
    assert "polars" in loaded_after(["fxprobe.workload.run"])


def test_children_are_the_kernel_s_list_and_match_psutil():
    import psutil
    parent = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(children(parent.pid)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert children(parent.pid) == sorted(c.pid for c in psutil.Process(parent.pid).children())
        assert len(children(parent.pid)) == 2
    finally:
        for pid in children(parent.pid):
            psutil.Process(pid).kill()
        parent.kill()
        parent.wait()
    assert children(parent.pid) == []          # ended: no children, no error
