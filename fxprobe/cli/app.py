"""The application object every command receives, and the way results are shown."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import click

from fxprobe.core.rundir import RunDir, utc_stamp
from fxprobe.core.runner import Runner
from fxprobe.core.verdict import Outcome, Verdict


@dataclass
class App:
    runs_base: Path = Path(os.environ.get("FXPROBE_RUNS", "runs"))
    run_dir: Path | None = None
    json_output: bool = False
    verbosity: int = 0
    argv: list[str] = field(default_factory=lambda: list(sys.argv))

    def progress(self, text: str) -> None:
        """Progress for a person at a terminal; never inside --json output."""
        if self.verbosity < 0:
            return
        if self.json_output and sys.stdout.isatty() is False and not sys.stderr.isatty():
            return
        click.echo(text, err=True)

    def new_run(self, command: str) -> RunDir:
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            (self.run_dir / "raw").mkdir(exist_ok=True)
            return RunDir(self.run_dir)
        return RunDir.create(self.runs_base, command)

    def runner(self, run: RunDir | None, dry_run: bool = False) -> Runner:
        return Runner(run, dry_run=dry_run)

    def emit(self, data: dict, human: list[str]) -> None:
        if self.json_output:
            click.echo(json.dumps(data, indent=2, default=str))
        elif self.verbosity >= 0:
            for line in human:
                click.echo(line)


def finish(app: App, run: RunDir, command: str, results: dict, human: list[str],
           outcome: Outcome) -> int:
    """Write results.json and the manifest, print, and return the exit code."""
    results = {"command": command, "argv": app.argv, "finished": utc_stamp(),
               "outcome": outcome.value, "run_dir": str(run.path), **results}
    run.write_results(results)
    run.finalize()
    app.emit(results, human + [f"evidence: {run.path}"])
    return outcome.exit_code


def finish_verdict(app: App, run: RunDir, command: str, verdict: Verdict, extra: dict,
                   human: list[str]) -> int:
    return finish(app, run, command, {"verdict": verdict.to_dict(), **extra},
                  human + verdict.lines(), verdict.outcome)


pass_app = click.make_pass_decorator(App)
