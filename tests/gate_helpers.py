"""Helpers for the gate/report tests: run fxprobe in-process and make fake evidence runs."""

from __future__ import annotations

import json
from pathlib import Path

from fxprobe.cli.main import main
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome

BENCH = Path(__file__).parent / "fixtures" / "bench"


def fxprobe(tmp_path: Path, *args: str) -> int:
    return main(["--runs", str(tmp_path / "runs"), *args])


def runs_of(tmp_path: Path, command: str) -> list[Path]:
    base = tmp_path / "runs"
    if not base.exists():
        return []
    return sorted(p for p in base.iterdir() if p.name.endswith("-" + command.replace(" ", "-")))


def fake_run(base: Path, command: str, results: dict, outcome: str = "pass") -> Path:
    """A finished run directory whose results.json holds ``results`` (what a producer would write),
    in the library's envelope."""
    run = RunDir.start(command, ["fxprobe", *command.split()], base=base)
    run.finish(Outcome(outcome), results, reason="" if outcome == "pass" else f"planted {outcome}")
    return run.path


def r2(side: str, levels=(8, 16, 32)) -> list[str]:
    return [str(BENCH / f"r2-{side}-c{c}.json") for c in levels]


def g3_args(*extra: str) -> list[str]:
    args = ["gate", "g3"]
    for path in r2("array"):
        args += ["--candidate", path]
    for path in r2("local-nvme"):
        args += ["--baseline", path]
    return args + list(extra)


def results_of(run_path: Path) -> dict:
    return json.loads((run_path / "results.json").read_text())
