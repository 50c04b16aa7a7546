"""``fxprobe pattern capture|compare``: what the device really sees, beside what a profile does."""

from __future__ import annotations

from pathlib import Path

import click

from fxprobe.workload import pattern as pattern_lib
from fxprobe.cli.app import App, finish, pass_app
from fxprobe.core.errors import BadInput
from fxprobe.core.rundir import RunDir
from fxprobe.core.verdict import Outcome
from fxprobe.cli.options import duration


@click.group()
def pattern() -> None:
    """Capture a device's I/O pattern (blktrace or /proc/diskstats) and compare it with a profile's run."""


@pattern.command("capture")
@click.option("--device", required=True, help="Block device, e.g. /dev/nvme0n1.")
@click.option("--seconds", type=duration(gt=0), default=10, show_default=True, help="How long to capture.")
@click.option("--interval", type=duration(ge=0.05), default=0.5, show_default=True,
              help="diskstats sampling interval.")
@click.option("--method", type=click.Choice(["auto", "blktrace", "diskstats"]), default="auto", show_default=True)
@pass_app
def capture(app: App, device: str, seconds: float, interval: float, method: str) -> int:
    """Request sizes, read/write mix, queue depth and sequentiality of DEVICE for N seconds."""
    run = app.new_run("pattern capture", folder="pattern-capture")
    summary = pattern_lib.capture(device, seconds, runner=app.runner(run), method=method, interval=interval)
    return finish(app, run, "pattern capture", {"pattern": summary.to_dict()}, summary.lines(), Outcome.PASS)


def _results(path: Path, key: str, what: str) -> dict:
    data = RunDir.open(path).results()
    if key not in data:
        raise BadInput(f"{path}: not a {what} run directory (no {key!r} in results.json)")
    return data[key]


@pattern.command("compare")
@click.argument("capture_dir", type=click.Path(path_type=Path))
@click.argument("run_dir", type=click.Path(path_type=Path))
@pass_app
def compare(app: App, capture_dir: Path, run_dir: Path) -> int:
    """Put a capture (CAPTURE_DIR from `pattern capture`) beside a profile run (RUN_DIR from `fxprobe run`)."""
    captured = _results(capture_dir, "pattern", "`fxprobe pattern capture`")
    workload = _results(run_dir, "workload", "`fxprobe run`")
    differences = pattern_lib.compare(captured, workload)
    run = app.new_run("pattern compare", folder="pattern-compare")
    lines = [f"capture {capture_dir} beside run of {workload['profile']} ({run_dir})"] + [d.line() for d in differences]
    outcome = Outcome.PASS if all(d.same for d in differences) else Outcome.FAIL
    return finish(app, run, "pattern compare", {"differences": [d.to_dict() for d in differences],
                                                "capture": str(capture_dir), "run": str(run_dir)}, lines, outcome)
